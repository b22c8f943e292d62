#!/usr/bin/env python3
"""Weight files between NNTrainer and nntrainer, both ways (developer step).

  gen_golden.py gen XCHECK [--rev REV]
      For each case below: write test/golden/nntrainer/<case>/model.ini and
      train.dat, train one epoch with NNTrainer (XCHECK train), keep the .bin
      it saved during training as model.bin (fc_adam_after_train: the one its
      save() wrote after training), and write manifest.txt: NNTrainer's own
      reading of that file (XCHECK load). Checks on the way: NNTrainer reads
      the whole file back (no short trailer), the file has exactly the size the
      layout predicts, saving it again gives the same bytes, every Adam moment
      is non-zero and every second moment is >= 0 (fc_adam_after_train: it is
      weights, "adam", counters, and NNTrainer cannot read its trailer).
  gen_golden.py reverse XCHECK NNTRAINER_CLI [--out DIR]
      The other direction: nntrainer (NNTRAINER_CLI, e.g. build/nntrainer)
      trains each case's INI for one epoch and saves a .bin; NNTrainer loads
      it (XCHECK load) and saves it again; prints per case whether NNTrainer
      read the whole file, whether the size matched its layout and whether its
      re-save is byte-identical (fc_adam_after_train is left out: the CLI
      saves during training only).

XCHECK is xcheck.cpp compiled against an NNTrainer build of your own. Run from
anywhere; paths are resolved against the repository. The data comes from
fixed seeds, and NNTrainer seeds its own generators with 0, so one NNTrainer
build writes the same files every time. The cases and the manifest format:
test/golden/README.md; the layout: docs/weights.md.
"""
import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN = os.path.join(REPO, "test", "golden", "nntrainer")

MODEL = """[Model]
type = NeuralNetwork
epochs = 1
batch_size = 4
loss = cross

[Optimizer]
{opt}

[train_set]
type = file
path = train.dat
"""

FC = """
[fc1]
type = fully_connected
input_shape = 1:1:6
unit = 5
activation = relu
{frozen}
[fc2]
type = fully_connected
unit = 4
activation = relu

[fc3]
type = fully_connected
unit = 3
activation = softmax
"""

CONV_BN = """
[conv]
type = conv2d
input_shape = 1:6:6
filters = 2
kernel_size = 3,3

[bn]
type = batch_normalization
activation = relu
flatten = true
{frozen}
[fc]
type = fully_connected
unit = 3
activation = softmax
"""

SGD = "type = sgd\nlearning_rate = 0.1"
ADAM = "type = adam\nlearning_rate = 0.01"
ADAMW = "type = adamw\nlearning_rate = 0.01"
FROZEN = "trainable = false\n"

# name: (optimizer, body, input floats per sample, classes, what it covers)
# model.bin is the file NNTrainer writes during training (save_path, at the
# end of the epoch), except in the cases of AFTER_TRAIN.
CASES = {
    "fc_sgd": (SGD, FC.format(frozen=""), 6, 3,
               "fully_connected x3, sgd: weights and counters, no tag"),
    "fc_adam": (ADAM, FC.format(frozen=""), 6, 3,
                "fully_connected x3, adam: the tag and both moments of every weight"),
    "fc_adamw": (ADAMW, FC.format(frozen=""), 6, 3,
                 "fully_connected x3, adamw: no tag and no moments"),
    "fc_frozen_adam": (ADAM, FC.format(frozen=FROZEN), 6, 3,
                       "fc1 trainable = false, adam: fc1 is saved, without moments"),
    "conv_bn_sgd": (SGD, CONV_BN.format(frozen=""), 36, 3,
                    "conv2d + batch_normalization, sgd: moving statistics saved"),
    "conv_bn_adam": (ADAM, CONV_BN.format(frozen=""), 36, 3,
                     "conv2d + batch_normalization, adam: no moments for the moving statistics"),
    "conv_bn_frozen_adam": (ADAM, CONV_BN.format(frozen=FROZEN), 36, 3,
                            "batch_normalization trainable = false, adam: no moments for bn"),
    "fc_adam_after_train": (ADAM, FC.format(frozen=""), 6, 3,
                            "fc_adam saved by save() after train() returned: the tag, "
                            "no moments, epoch = epochs + 1"),
}
# Saved by the application after train() returned (what NNTrainer's
# ml_train_model_save does after ml_train_model_run): the gradients are
# freed by then, so NNTrainer writes the "adam" tag without moments, and its
# own load cannot read the counters back.
AFTER_TRAIN = {"fc_adam_after_train"}
SAMPLES = 16


def write_data(path, seed, n_in, n_cls):
    rng = random.Random(seed)
    with open(path, "wb") as f:
        for _ in range(SAMPLES):
            x = [rng.uniform(-1.0, 1.0) for _ in range(n_in)]
            c = rng.randrange(n_cls)
            y = [1.0 if k == c else 0.0 for k in range(n_cls)]
            f.write(struct.pack("<%df" % (n_in + n_cls), *(x + y)))


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, **kw)
    return r.returncode, r.stdout, r.stderr


def parse_manifest(text):
    m = {"weights": [], "moments": [], "tag": None}
    for line in text.splitlines():
        t = line.split()
        if not t or t[0].startswith("#"):
            continue
        if t[0] == "weight":
            m["weights"].append({"name": t[1], "dim": t[2], "offset": int(t[4]),
                                 "floats": int(t[6]), "sum": float(t[8]),
                                 "optvars": int(t[14])})
        elif t[0] == "moment":
            m["moments"].append({"name": t[1], "j": int(t[2]), "offset": int(t[4]),
                                 "floats": int(t[6]), "sum": float(t[8])})
        elif t[0] == "tag":
            m["tag"] = int(t[3])
        elif t[0] == "counters":
            m["counters"] = (int(t[2]), int(t[4]), int(t[6]))
        elif t[0] in ("loaded", "trailer_ok", "expected_size", "file_size"):
            m[t[0]] = int(t[1])
        elif t[0] == "optimizer":
            m["optimizer"] = t[1] if len(t) > 1 else ""
    return m


def clean_logs(d):
    """NNTrainer's logger writes logs/log_nntrainer_*.out in the working
    directory (the case folder, where xcheck works): remove them."""
    logs = os.path.join(d, "logs")
    if not os.path.isdir(logs):
        return
    for f in os.listdir(logs):
        if f.startswith("log_nntrainer_") and f.endswith(".out"):
            os.remove(os.path.join(logs, f))
    if not os.listdir(logs):
        os.rmdir(logs)


def check_moments(binpath, man):
    data = open(binpath, "rb").read()
    for mo in man["moments"]:
        vals = struct.unpack_from("<%df" % mo["floats"], data, mo["offset"])
        if not any(v != 0.0 for v in vals):
            return "moment %d of %s is all zeros" % (mo["j"], mo["name"])
        if mo["j"] == 1 and min(vals) < 0:
            return "second moment of %s has a negative value" % mo["name"]
    return None


def check_during(binpath, man, out, rc, err, resave):
    """The file NNTrainer saved during training: it reads all of it back."""
    problems = []
    if rc:
        problems.append("load rc %d: %s" % (rc, err.strip()[-500:]))
    if man.get("expected_size") != man.get("file_size"):
        problems.append("size %s, layout says %s" % (man.get("file_size"),
                                                     man.get("expected_size")))
    if not os.path.exists(resave) or open(resave, "rb").read() != open(binpath, "rb").read():
        problems.append("re-saved file differs")
    bad = check_moments(binpath, man)
    if bad:
        problems.append(bad)
    return problems, ""


def check_after(binpath, man):
    """The file saved after train(): weights, the tag, the counters."""
    problems = []
    data = open(binpath, "rb").read()
    tag = man.get("tag")
    if man.get("trailer_ok") != 0:
        problems.append("NNTrainer read the trailer of a file without moments")
    if tag is None or data[tag:tag + 4] != b"adam" or len(data) != tag + 4 + 8:
        problems.append("not weights + adam + counters (%d bytes)" % len(data))
        return problems, ""
    epoch, it = struct.unpack_from("<2I", data, tag + 4)
    return problems, ("# NNTrainer reads the weights, then misses the moments it expects "
                      "after the tag:\n# it stops there and keeps its counters at 0\n"
                      "saved_after_train counters offset %d epoch %d iteration %d\n"
                      % (tag + 4, epoch, it))


def gen(args):
    failures = 0
    for name, (opt, body, n_in, n_cls, what) in CASES.items():
        d = os.path.join(GOLDEN, name)
        ini = os.path.join(d, "model.ini")
        os.makedirs(d, exist_ok=True)
        with open(ini, "w") as f:
            f.write("# %s (test/golden/README.md)\n" % what)
            f.write(MODEL.format(opt=opt) + body)
        write_data(os.path.join(d, "train.dat"), sum(map(ord, name)), n_in, n_cls)
        binpath = os.path.join(d, "model.bin")
        if os.path.exists(binpath):
            os.remove(binpath)
        with tempfile.TemporaryDirectory() as tmp:
            during = os.path.join(tmp, "during.bin")
            if name in AFTER_TRAIN:
                cmd = [args.xcheck, "train", ini, during, "--save-after", binpath]
            else:
                cmd = [args.xcheck, "train", ini, binpath]
            rc, out, err = run(cmd)
            if rc or not os.path.exists(binpath):
                print("%s: NNTrainer training failed (rc %d)\n%s%s" % (
                    name, rc, out[-2000:], err[-2000:]))
                failures += 1
                clean_logs(d)
                continue
            resave = os.path.join(tmp, "resave.bin")
            rc, out, err = run([args.xcheck, "load", ini, binpath, "--resave", resave])
            man = parse_manifest(out)
            if name in AFTER_TRAIN:
                problems, extra = check_after(binpath, man)
                # the moment and counter lines describe what NNTrainer looked
                # for, not what this file holds: leave them out
                out = "".join(l + "\n" for l in out.splitlines()
                              if l.split()[0] not in ("moment", "counters", "expected_size"))
            else:
                problems, extra = check_during(binpath, man, out, rc, err, resave)
        clean_logs(d)
        header = "# NNTrainer %s; case %s: %s\n" % (args.rev, name, what)
        with open(os.path.join(d, "manifest.txt"), "w") as f:
            f.write(header + out + extra)
        if name in AFTER_TRAIN:
            layout = "the tag, then %s" % extra.strip().splitlines()[-1] if extra else "?"
        else:
            layout = "%d moments, counters (offset, epoch, iteration) %s" % (
                len(man["moments"]), man.get("counters"))
        print("%-20s %5d bytes, %d weights, %s: %s" % (
            name, man.get("file_size", -1), len(man["weights"]), layout,
            "; ".join(problems) or "ok"))
        failures += bool(problems)
    return 1 if failures else 0


def reverse(args):
    out_dir = args.out or tempfile.mkdtemp(prefix="nntr-reverse-")
    os.makedirs(out_dir, exist_ok=True)
    failures = 0
    for name in CASES:
        if name in AFTER_TRAIN:
            continue  # nntrainer's CLI saves during training only
        ini = os.path.join(GOLDEN, name, "model.ini")
        ours = os.path.join(out_dir, name + ".bin")
        resave = os.path.join(out_dir, name + ".nntrainer-resave.bin")
        for p in (ours, resave):
            if os.path.exists(p):
                os.remove(p)
        rc, out, err = run([args.cli, "train", ini, "save_path=" + ours, "--seed", "1"])
        if rc or not os.path.exists(ours):
            print("%-20s nntrainer training failed (rc %d): %s" % (name, rc, err.strip()[-300:]))
            failures += 1
            continue
        rc, out, err = run([args.xcheck, "load", ini, ours, "--resave", resave])
        clean_logs(os.path.dirname(ini))
        man = parse_manifest(out)
        same = os.path.exists(resave) and open(resave, "rb").read() == open(ours, "rb").read()
        ok = rc == 0 and same
        print("%-20s ours %5d bytes; NNTrainer: loaded %s, trailer read %s, layout size %s, "
              "counters %s, re-save identical %s -> %s" % (
                  name, os.path.getsize(ours), man.get("loaded"), man.get("trailer_ok"),
                  man.get("expected_size"), man.get("counters"), same,
                  "ok" if ok else "MISMATCH"))
        failures += not ok
    print("files in", out_dir)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("xcheck")
    g.add_argument("--rev", default="(revision not given)")
    r = sub.add_parser("reverse")
    r.add_argument("xcheck")
    r.add_argument("cli")
    r.add_argument("--out")
    args = ap.parse_args()
    args.xcheck = os.path.abspath(args.xcheck)
    if args.cmd == "reverse":
        args.cli = os.path.abspath(args.cli)
        return reverse(args)
    return gen(args)


if __name__ == "__main__":
    sys.exit(main())
