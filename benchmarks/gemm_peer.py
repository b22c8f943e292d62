#!/usr/bin/python3
"""The peer of nnt_bench_vk_gemm: FP32 C = A B on CUDA with torch.matmul
(TF32 off, so both sides do full single precision), square n x n at the
same sizes, each run `calls` matmuls between two torch.cuda.synchronize()
calls, the median over runs, printed in the same line format.
Usage: gemm_peer.py [--sizes 1024,2048,4096] [--runs 9] [--calls 5]
Both in one command on a GPU machine:
  build/nnt_bench_vk_gemm && python3 benchmarks/gemm_peer.py"""
import argparse
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,2048,4096")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--calls", type=int, default=5)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gemm_peer.py: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"device: {torch.cuda.get_device_name()} (torch {torch.__version__})")
    for n in (int(s) for s in args.sizes.split(",")):
        a = torch.rand(n, n, device="cuda") - 0.5
        b = torch.rand(n, n, device="cuda") - 0.5
        c = torch.empty(n, n, device="cuda")
        times = []
        for r in range(-1, args.runs):  # one warm-up run
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.calls):
                torch.matmul(a, b, out=c)
            torch.cuda.synchronize()
            if r >= 0:
                times.append((time.perf_counter() - t0) / args.calls)
        med = statistics.median(times)
        print(f"torch.matmul n={n} fp32 (tf32 off): median {med * 1e3:.3f} ms "
              f"(min {min(times) * 1e3:.3f}, max {max(times) * 1e3:.3f}; {args.runs} runs x "
              f"{args.calls} calls) {2.0 * n ** 3 / med / 1e12:.3f} TFLOP/s")


if __name__ == "__main__":
    main()
