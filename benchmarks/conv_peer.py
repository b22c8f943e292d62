#!/usr/bin/python3
"""ResNet-18's 3x3 convolutions, ours against PyTorch's, in alternating
rounds: each round runs benchmarks/torch_conv_layers.py and then
nnt_bench_kernels' resnet18 rows, both on the same thread count, so each
pair of figures sees the same minute of a VM whose speed drifts.

Usage (after `bash scripts/build.sh build`):
    /usr/bin/python3 benchmarks/conv_peer.py [--rounds 3] [--threads 1]

Prints a markdown table: per shape and pass, the median GFLOP/s of each
side over the rounds and the pair ratios (our time over PyTorch's in the
same round: PyTorch's GFLOP/s over ours), median and min-max. Below 1.0
ours is faster. OPENBLAS_CORETYPE is removed from both environments, as in
run_benchmarks.py."""
import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASSES = ("forward", "gradient", "derivative")


def peer_round(env, threads):
    """{(shape, pass): GFLOP/s} from one run of torch_conv_layers.py."""
    out = subprocess.run(["/usr/bin/python3", "benchmarks/torch_conv_layers.py", str(threads)],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    got = {}
    for line in out.splitlines():
        tok = line.split()
        if len(tok) == 8 and tok[1] == "forward":  # name forward F gradient G derivative D unit
            for i, name in enumerate(PASSES):
                got[(tok[0], name)] = float(tok[2 + 2 * i])
    return got


def ours_round(env):
    """{(shape, pass): GFLOP/s} from one run of nnt_bench_kernels' resnet18 rows."""
    out = subprocess.run([os.path.join(ROOT, "build", "nnt_bench_kernels")], cwd=ROOT,
                         env=dict(env, BENCH_CONV_ONLY="resnet18"), capture_output=True,
                         text=True, check=True).stdout
    got = {}
    for line in out.splitlines():
        row = json.loads(line)
        tok = row["kernel"].split()  # conv2d resnet18 SHAPE ... PASS
        if len(tok) > 3 and tok[1] == "resnet18" and tok[-1] in PASSES:
            got[(tok[2], tok[-1])] = row["layer_gflops"]
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if args.rounds < 1 or args.threads < 1:
        ap.error("--rounds and --threads must be at least 1")
    t = str(args.threads)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=t, OMP_NUM_THREADS=t, NNTRAINER_THREADS=t,
               BENCH_THREADS=t)
    env.pop("OPENBLAS_CORETYPE", None)
    rounds = [(peer_round(env, args.threads), ours_round(env)) for _ in range(args.rounds)]
    keys = [k for k in rounds[0][0] if all(k in p and k in o for p, o in rounds)]
    if not keys:
        raise SystemExit("conv_peer: no shape is in both programs' output")
    lines = [f"{args.rounds} alternating rounds, {args.threads} thread(s) each; GFLOP/s "
             "medians; pair ratio = PyTorch's GFLOP/s / ours in the same round (our time "
             "over PyTorch's), median (min-max)", "",
             "| shape | pass | nntrainer GFLOP/s | PyTorch GFLOP/s | pair ratios |",
             "|---|---|---|---|---|"]
    for shape, name in keys:
        ours = [o[(shape, name)] for _, o in rounds]
        peer = [p[(shape, name)] for p, _ in rounds]
        pairs = [b / a for a, b in zip(ours, peer)]
        lines.append(f"| {shape} | {name} | {statistics.median(ours):.1f} | "
                     f"{statistics.median(peer):.1f} | {statistics.median(pairs):.2f} "
                     f"({min(pairs):.2f}-{max(pairs):.2f}) |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
