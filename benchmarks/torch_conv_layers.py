"""PyTorch's conv2d at ResNet-18's 3x3 shapes (batch 32, no bias): GFLOP/s
of the forward, the weight gradient and the input derivative on T
threads, each the median of 15 timed runs after 3 untimed ones (the
forward as in training, recording autograd's graph; each backward alone,
on a graph kept from one forward). The peer's side of nnt_bench_kernels' resnet18 rows
(docs/performance.md, twenty-seventh round).

Usage: /usr/bin/python3 benchmarks/torch_conv_layers.py [THREADS]"""
import sys
import time

import torch

SHAPES = [  # name, channels, filters, input height = width, stride
    ("stage1", 64, 64, 32, 1),
    ("stage2", 128, 128, 16, 1),
    ("stage3", 256, 256, 8, 1),
    ("stage4", 512, 512, 4, 1),
    ("res2a_c1", 64, 128, 32, 2),
    ("res3a_c1", 128, 256, 16, 2),
    ("res4a_c1", 256, 512, 8, 2),
]


def median_s(fn, runs=15, warm=3):
    for _ in range(warm):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[runs // 2]


def main():
    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    for name, c, f, hw, stride in SHAPES:
        conv = torch.nn.Conv2d(c, f, 3, stride, 1, bias=False)
        x = torch.randn(32, c, hw, hw, requires_grad=True)
        gy = torch.randn_like(conv(x))
        oh = (hw + 2 - 3) // stride + 1
        gflop = 2.0 * 32 * c * f * 9 * oh * oh / 1e9
        fwd = median_s(lambda: conv(x))
        y = conv(x)
        dx = median_s(lambda: torch.autograd.grad(y, x, gy, retain_graph=True))
        dw = median_s(lambda: torch.autograd.grad(y, conv.weight, gy, retain_graph=True))
        print(f"{name:9s} forward {gflop / fwd:6.1f} gradient {gflop / dw:6.1f} "
              f"derivative {gflop / dx:6.1f} GFLOP/s")


if __name__ == "__main__":
    main()
