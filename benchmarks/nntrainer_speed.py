#!/usr/bin/python3
"""Training speed (ms/step) of this library against NNTrainer on the same
models and the same data files (docs/performance.md, "Against NNTrainer
(speed)").

It builds nothing: NNTrainer's side is a program already built elsewhere
that trains an INI (`XCHECK train INI OUT_BIN`, benchmarks/nntrainer-xcheck),
ours is `build/nntrainer train INI`. Both read the same INI and the same raw
data file (NNTrainer's `type = file` format: each sample's float inputs then
its one-hot float label), written here from the model's INI: inputs N(0,1),
labels cycling over the classes, seed 1.

Steady-state ms/step without setup (parse, compile, plan, first-step
allocations) is the difference of two runs of each program: a short one
(BASE_BATCHES batches, 1 epoch) and a long one (LONG_BATCHES batches times
EPOCHS epochs): (t_long - t_short) / (extra steps). Wall time; the two
programs alternate (which one goes first alternates too), the median of
--reps differences is reported with the spread.

usage: nntrainer_speed.py --xcheck PATH [--nntr-libdir DIR] [--ours PATH]
         [--threads N] [--reps R] [--out DIR] [MODEL_INI ...]
"""
import argparse, os, random, re, statistics, struct, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# model -> (base batches, long batches, long epochs)
PLANS = {
    "benchmarks/models/mlp.ini": (50, 50, 21),
    "benchmarks/models/lenet5.ini": (50, 50, 7),
    "benchmarks/models/fmnist_cnn.ini": (50, 50, 5),
    "benchmarks/models/convbn.ini": (4, 24, 1),
    "Applications/FashionMNIST/mlp.ini": (50, 50, 21),
    "Applications/FashionMNIST/cnn.ini": (50, 50, 5),
    "Applications/FashionMNIST/cnn_bn.ini": (50, 50, 5),
    "Applications/ResNet/resnet18.ini": (2, 8, 1),
}


def make_ini(ini, out, batches, epochs):
    """The model's INI with `epochs`, no seed/save_path/validation/test set,
    and a [train_set] of type file holding `batches` batches."""
    text = open(os.path.join(ROOT, ini)).read()
    shape = re.search(r"(?m)^\s*input_shape\s*=\s*([0-9:]+)", text).group(1)
    units = re.findall(r"(?m)^\s*unit\s*=\s*(\d+)", text)
    batch = int(re.search(r"(?m)^\s*batch_size\s*=\s*(\d+)", text).group(1))
    bufm = re.search(r"(?ms)^\[train_set\].*?^\s*buffer_size\s*=\s*(\d+)", text)
    feat = 1
    for d in shape.split(":"):
        feat *= int(d)
    lab = int(units[-1])
    tag = ini.replace("/", "_")[:-4]
    raw = os.path.join(out, f"{tag}_{batches}.dat")
    if not os.path.exists(raw):
        rnd = random.Random(1)
        with open(raw + ".tmp", "wb") as f:
            for s in range(batches * batch):
                f.write(struct.pack(f"{feat}f", *[rnd.gauss(0, 1) for _ in range(feat)]))
                oh = [0.0] * lab
                oh[s % lab] = 1.0
                f.write(struct.pack(f"{lab}f", *oh))
        os.replace(raw + ".tmp", raw)
    keep = []
    for j, sec in enumerate(re.split(r"(?m)^\[", text)):
        if j == 0 or not sec.strip():
            continue
        name = sec.split("]", 1)[0].strip().lower()
        if name in ("train_set", "valid_set", "test_set", "dataset"):
            continue
        body = "[" + sec
        body = re.sub(r"(?m)^\s*(epochs|seed|save_path)\s*=.*$", "", body)
        if name == "model":
            body += f"\nepochs = {epochs}\n"
        keep.append(body)
    keep.append(f"[train_set]\ntype = file\npath = {raw}\n" +
                (f"buffer_size = {bufm.group(1)}\n" if bufm else ""))
    path = os.path.join(out, f"{tag}_{batches}x{epochs}.ini")
    open(path, "w").write("\n".join(keep))
    return path, batch


def run(cmd, env):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed: {r.stdout[-300:]} {r.stderr[-600:]}")
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xcheck", required=True, help="NNTrainer's xcheck, already built")
    ap.add_argument("--nntr-libdir", default="", help="put first on LD_LIBRARY_PATH for xcheck")
    ap.add_argument("--ours", default=os.path.join(ROOT, "build", "nntrainer"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="/tmp/nntr-speed")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    t = str(a.threads)
    env_n = dict(base, OMP_NUM_THREADS=t, OPENBLAS_NUM_THREADS=t)
    env_n.pop("NNTRAINER_THREADS", None)
    if a.nntr_libdir:
        env_n["LD_LIBRARY_PATH"] = a.nntr_libdir + ":" + base.get("LD_LIBRARY_PATH", "")
    env_o = dict(base, NNTRAINER_THREADS=t)
    env_o.pop("OPENBLAS_NUM_THREADS", None)
    env_o.pop("OMP_NUM_THREADS", None)
    print(f"threads {t}, reps {a.reps}, load average {os.getloadavg()[0]:.1f}")
    print("| model | batch | extra steps | NNTrainer ms/step (spread) | nntrainer ms/step (spread) | nntrainer / NNTrainer |")
    print("|---|---:|---:|---:|---:|---:|")
    for ini in a.models or list(PLANS):
        nb0, nb1, ep = PLANS[ini]
        short, batch = make_ini(ini, a.out, nb0, 1)
        long_, _ = make_ini(ini, a.out, nb1, ep)
        steps = nb1 * ep - nb0
        progs = {
            "NNTrainer": (lambda p: [a.xcheck, "train", p, os.path.join(a.out, "xcheck.bin")], env_n),
            "ours": (lambda p: [a.ours, "train", p], env_o),
        }
        res = {k: [] for k in progs}
        for r in range(a.reps):
            order = list(progs) if r % 2 == 0 else list(progs)[::-1]
            for k in order:
                mk, env = progs[k]
                ts = run(mk(short), env)
                tl = run(mk(long_), env)
                res[k].append(1000.0 * (tl - ts) / steps)
        med = {k: statistics.median(v) for k, v in res.items()}
        sp = {k: f"{min(v):.2f}-{max(v):.2f}" for k, v in res.items()}
        print(f"| {ini} | {batch} | {steps} | {med['NNTrainer']:.2f} ({sp['NNTrainer']}) | "
              f"{med['ours']:.2f} ({sp['ours']}) | {med['ours'] / med['NNTrainer']:.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
