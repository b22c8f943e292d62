#!/usr/bin/python3
"""nntrainer against PyTorch on the same models, batch sizes, optimizer (SGD)
and random data, alternating runs, both on the same thread count. Each
program trains every step on one batch made before its loop (no data
loading is timed or runs beside the steps).

Usage (after `bash scripts/build.sh build`):
    /usr/bin/python3 benchmarks/run_benchmarks.py [--reps 3] [--threads 2] [--out FILE]
        [--warmup 3] [--steps 20] [--warmup-ms 500] [--min-ms 1000] [--keep-coretype]
        [--only KEY[,KEY...]] [--no-kernels]
Writes a markdown table (default benchmarks/results.md) and prints it.
--only runs the named models (mlp, lenet5, fmnist_cnn, convbn, resnet18)
and --no-kernels leaves out the kernel table: for many pairs of one model.

Two ratios: "ratio" is the median of nntrainer's runs over the median of
PyTorch's; "pair ratios" are each nntrainer run over the PyTorch run right
after it (median, min-max). On a VM whose speed drifts between minutes the
pairs' median is the steadier figure: both runs of a pair see the same
machine.

OPENBLAS_CORETYPE is removed from both programs' environment unless
--keep-coretype is given: a user's environment does not set it, and a value
left there (some machines set one) pins both OpenBLAS users (nntrainer, and
PyTorch's linear algebra) to that kernel path."""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [
    ("MLP 784-256-256-10", "mlp", "benchmarks/models/mlp.ini", 64),
    ("LeNet-5", "lenet5", "benchmarks/models/lenet5.ini", 32),
    ("Fashion-MNIST CNN", "fmnist_cnn", "benchmarks/models/fmnist_cnn.ini", 32),
    ("conv-BN-ReLU 3:64:64", "convbn", "benchmarks/models/convbn.ini", 32),
    ("ResNet-18 3:32:32", "resnet18", "Applications/ResNet/resnet18.ini", 32),
]


def cpu_name():
    """The CPU's model name, family and model (the VMs here report only
    "AMD EPYC")."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                info.setdefault(k.strip(), v.strip())
    except OSError:
        return platform.processor() or "unknown"
    return (f"{info.get('model name', '?')} (family {info.get('cpu family', '?')}, "
            f"model {info.get('model', '?')})")


def run_json(cmd, env):
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    # and at least this long: a model of a millisecond a step is still
    # speeding up over its first 100 ms at two threads
    ap.add_argument("--warmup-ms", type=float, default=500.0)
    ap.add_argument("--min-ms", type=float, default=1000.0)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results.md"))
    ap.add_argument("--keep-coretype", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--no-kernels", action="store_true")
    args = ap.parse_args()
    only = [k for k in args.only.split(",") if k]
    unknown = [k for k in only if k not in [m[1] for m in MODELS]]
    if unknown:
        ap.error(f"--only: unknown model {unknown[0]!r} (one of "
                 f"{', '.join(m[1] for m in MODELS)})")
    t = str(args.threads)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=t, OMP_NUM_THREADS=t, NNTRAINER_THREADS=t,
               BENCH_THREADS=t, BENCH_WARMUP_MS=str(args.warmup_ms),
               BENCH_MIN_MS=str(args.min_ms))
    if not args.keep_coretype:
        env.pop("OPENBLAS_CORETYPE", None)
    rows = []
    c2c = []  # core-to-core round trips, ns (see benchmarks/bench_c2c.c)

    def probe(into):
        r = run_json([os.path.join(ROOT, "build", "nnt_bench_c2c")], env)
        if r.get("round_trip_ns") is not None:
            c2c.append(r["round_trip_ns"])
            into.append(r["round_trip_ns"])

    for title, key, ini, batch in MODELS:
        if only and key not in only:
            continue
        nn, pt, cm = [], [], []
        for _ in range(args.reps):  # alternate, so drift hits both alike
            probe(cm)
            nn.append(run_json([os.path.join(ROOT, "build", "nnt_bench_train"), ini,
                                str(args.warmup), str(args.steps)], env))
            pt.append(run_json(["/usr/bin/python3", "benchmarks/torch_models.py", key,
                                str(args.warmup), str(args.steps)], env))
        pairs = [a["ms_median"] / b["ms_median"] for a, b in zip(nn, pt)]
        n_ms = statistics.median(r["ms_median"] for r in nn)
        p_ms = statistics.median(r["ms_median"] for r in pt)
        n_rss = max(r["peak_rss_kb"] for r in nn)
        p_rss = max(r["peak_rss_kb"] for r in pt)
        rows.append((title, batch, n_ms, min(r["ms_median"] for r in nn),
                     max(r["ms_median"] for r in nn), p_ms,
                     min(r["ms_median"] for r in pt), max(r["ms_median"] for r in pt),
                     n_rss, p_rss, nn[0],
                     f"{min(cm):.0f}-{max(cm):.0f}" if cm else "-",
                     f"{statistics.median(pairs):.2f} ({min(pairs):.2f}-{max(pairs):.2f})"))
        print(f"{title}: nntrainer {n_ms:.2f} ms, PyTorch {p_ms:.2f} ms", file=sys.stderr)
    kern = [] if args.no_kernels else [json.loads(l) for l in subprocess.run(
        [os.path.join(ROOT, "build", "nnt_bench_kernels")], cwd=ROOT, env=env,
        capture_output=True, text=True, check=True).stdout.splitlines()]
    lines = [
        f"Measured {datetime.date.today()} on {platform.machine()} "
        f"({os.cpu_count()} cores), {args.threads} threads each, "
        f"{args.reps} alternating runs of at least {args.steps} steps and "
        f"{args.min_ms:.0f} ms after at least {args.warmup} warm-up steps and "
        f"{args.warmup_ms:.0f} ms; ms/step is the median of the runs' medians, the spread "
        "is min-max of the runs' medians.",
        f"CPU: {cpu_name()}. OPENBLAS_CORETYPE: {env.get('OPENBLAS_CORETYPE', 'unset')}.",
        f"nntrainer's BLAS: {rows[0][10].get('blas', 'not reported')}.",
        (f"Core-to-core round trip (nnt_bench_c2c, before each pair of runs): "
         f"{min(c2c):.0f}-{max(c2c):.0f} ns, median {statistics.median(c2c):.0f} "
         "(about 100 ns: the two cores share a cache; 350-800 ns: they do not, and "
         "two-thread figures pay for every value passed between them)."
         if c2c else "Core-to-core round trip: one CPU."),
        "",
        "| model | batch | nntrainer ms/step (spread) | PyTorch ms/step (spread) | ratio | "
        "pair ratios | nntrainer peak RSS | PyTorch peak RSS | RSS ratio | arena / lower bound | "
        "total planned | core round trip ns |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (title, batch, n_ms, n_lo, n_hi, p_ms, p_lo, p_hi, n_rss, p_rss, plan, crt, pr) in rows:
        lines.append(
            f"| {title} | {batch} | {n_ms:.2f} ({n_lo:.2f}-{n_hi:.2f}) | "
            f"{p_ms:.2f} ({p_lo:.2f}-{p_hi:.2f}) | {n_ms / p_ms:.2f} | {pr} | "
            f"{n_rss / 1024:.1f} MiB | {p_rss / 1024:.1f} MiB | {n_rss / p_rss:.2f} | "
            f"{plan['arena_bytes'] / 2**20:.2f} / {plan['lower_bound_bytes'] / 2**20:.2f} MiB | "
            f"{plan['total_planned_bytes'] / 2**20:.2f} MiB | {crt} |")
    if kern:
        lines += ["", ("Kernel efficiency (medians of 21 runs each, in three alternating blocks "
               "of 7; ratio = layer GFLOP/s / bare sgemm GFLOP/s):"),
                  "", "| kernel | layer GFLOP/s | sgemm GFLOP/s | ratio |", "|---|---|---|---|"]
    for k in kern:
        lines.append(f"| {k['kernel']} | {k['layer_gflops']:.1f} | {k['sgemm_gflops']:.1f} | "
                     f"{k['ratio']:.2f} |")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
