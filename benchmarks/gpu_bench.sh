#!/usr/bin/env bash
# The GPU figures of docs/performance.md in one run, for a machine with a
# GPU, its Vulkan driver and PyTorch with CUDA (docs/gpu.md says how to set
# up the loader): SGEMM at 1024/2048/4096 on the Vulkan backend and cuBLAS
# FP32 (TF32 off) side by side, then ResNet-18 (3:32:32, SGD) ms/step at
# batch 32 and 128 on Vulkan, PyTorch CUDA FP32 and this library's CPU
# backend on the same machine. Usage, after `bash scripts/build.sh build`:
#   bash benchmarks/gpu_bench.sh [WARMUP] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
warm=${1:-3}
steps=${2:-20}
py=${PYTHON:-/usr/bin/python3} # the interpreter that has PyTorch with CUDA
echo "## SGEMM (median of 9 runs x 5 calls)"
build/nnt_bench_vk_gemm
"$py" benchmarks/gemm_peer.py
echo "## ResNet-18 3:32:32, SGD: ms/step (median of $steps after $warm warm-up)"
for b in 32 128; do
  echo "batch $b vulkan: $(build/nnt_bench_train Applications/ResNet/resnet18.ini "$warm" "$steps" \
    engine=gpu batch_size="$b")"
  echo "batch $b torch-cuda: $(BENCH_DEVICE=cuda BENCH_BATCH=$b "$py" \
    benchmarks/torch_models.py resnet18 "$warm" "$steps")"
  echo "batch $b cpu: $(NNTRAINER_THREADS=$(nproc) build/nnt_bench_train \
    Applications/ResNet/resnet18.ini 1 3 batch_size="$b")"
done
