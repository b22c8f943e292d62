#!/usr/bin/python3
"""PyTorch twins of benchmarks/models/*.ini and ResNet-18, timed the same way
as nnt_bench_train: random data, SGD, warm-up steps excluded, median ms per
step, peak RSS. Usage: torch_models.py MODEL [WARMUP] [STEPS]; prints JSON.
BENCH_DEVICE=cuda runs on the GPU in FP32 (TF32 off, as the Vulkan backend
computes), timing each step to its cuda synchronize; BENCH_BATCH overrides
the batch size. BENCH_WARMUP_MS and BENCH_MIN_MS, as nnt_bench_train takes
them: the warm-up lasts at least that long, and the timed steps fill at
least that long ("steps" in the JSON: how many were timed)."""
import json
import os
import resource
import sys
import time

import torch
import torch.nn as nn

torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256),
                         nn.ReLU(), nn.Linear(256, 10)), (64, 1, 1, 784)


def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10)), (32, 1, 28, 28)


def fmnist_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)), (32, 1, 28, 28)


def convbn():
    def block(i, o):
        return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o, eps=1e-3),
                nn.ReLU()]
    return nn.Sequential(*block(3, 32), nn.MaxPool2d(2), *block(32, 64), nn.MaxPool2d(2),
                         *block(64, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(128, 10)), (32, 3, 64, 64)


class Basic(nn.Module):
    def __init__(self, i, o, s):
        super().__init__()
        self.c1 = nn.Conv2d(i, o, 3, s, 1, bias=False)
        self.b1 = nn.BatchNorm2d(o, eps=1e-3)
        self.c2 = nn.Conv2d(o, o, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(o, eps=1e-3)
        self.sc = None
        if s != 1 or i != o:
            self.sc = nn.Sequential(nn.Conv2d(i, o, 1, s, bias=False), nn.BatchNorm2d(o, eps=1e-3))

    def forward(self, x):
        h = torch.relu(self.b1(self.c1(x)))
        h = self.b2(self.c2(h))
        return torch.relu(h + (self.sc(x) if self.sc is not None else x))


def resnet18():
    layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64, eps=1e-3), nn.ReLU()]
    width = 64
    for stage, o in enumerate([64, 128, 256, 512]):
        for b in range(2):
            s = 2 if stage > 0 and b == 0 else 1
            layers.append(Basic(width, o, s))
            width = o
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 100)]
    return nn.Sequential(*layers), (32, 3, 32, 32)


def main():
    name = sys.argv[1]
    warmup = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    torch.manual_seed(1)
    model, shape = globals()[name]()
    if os.environ.get("BENCH_BATCH"):
        shape = (int(os.environ["BENCH_BATCH"]),) + tuple(shape[1:])
    dev = torch.device(os.environ.get("BENCH_DEVICE", "cpu"))
    cuda = dev.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    model = model.to(dev)
    classes = 100 if name == "resnet18" else 10
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(*shape).to(dev)
    y = torch.randint(0, classes, (shape[0],)).to(dev)
    warm_ms = float(os.environ.get("BENCH_WARMUP_MS", "0"))
    min_ms = float(os.environ.get("BENCH_MIN_MS", "0"))
    times, timed_ms = [], 0.0
    t_start = time.perf_counter()
    s = -1
    while True:
        s += 1
        if s >= warmup and not times and (time.perf_counter() - t_start) * 1e3 < warm_ms:
            warmup = s + 1
        if s >= warmup and len(times) >= steps and (timed_ms >= min_ms or
                                                     len(times) >= 1000000):
            break
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if cuda:
            torch.cuda.synchronize()
        if s >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
            timed_ms += times[-1]
    times.sort()
    print(json.dumps({"device": str(dev), "batch": shape[0],
                      "ms_median": times[len(times) // 2], "ms_min": times[0],
                      "ms_max": times[-1], "steps": len(times), "warmup": warmup,
                      "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


if __name__ == "__main__":
    main()
