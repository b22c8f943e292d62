#!/usr/bin/env bash
# Does any example slow down as it trains? Runs nnt_bench_epochs (built in
# BUILD, default build) over every example for EPOCHS epochs (default 10)
# on one thread and prints a table: each example's median CPU time of a
# training step on the training thread in its first and its last epoch,
# their ratio, and that ratio over the same of a fixed reference timed at
# each epoch's end (the VM's own speed moves by tens of percent between
# minutes), and the replay: the state after epoch 1's first step and after
# the last epoch, each training again on the same batches, alternating, in
# the same minutes (the goal: at most 1.05). The Fashion-MNIST examples
# train on their data set (/usr/share/datasets/fashion-mnist); the others
# on a seeded synthetic set of SAMPLES samples (default 320, ten steps an
# epoch at batch 32), as their own programs or INIs do. THREADS (default
# 1) compute threads; the times are the training thread's CPU time. About
# 10 minutes on a 2-core VM. Usage:
#   benchmarks/epoch_drift.sh [EPOCHS] [SAMPLES] [BUILD] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-10}
samples=${2:-320}
build=${3:-build}
threads=${4:-1}
bench="$build/nnt_bench_epochs"
if [ ! -x "$bench" ]; then
  echo "epoch_drift.sh: $bench is not built (cmake --build $build)" >&2
  exit 1
fi
export NNTRAINER_THREADS=$threads OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
printf '| example | data | steps an epoch | epoch 1 ms | epoch %s ms | last / first |' "$epochs"
printf ' normalized | replayed |\n'
printf '|---|---|---:|---:|---:|---:|---:|---:|\n'
for ini in Applications/FashionMNIST/mlp.ini Applications/FashionMNIST/cnn.ini \
           Applications/FashionMNIST/cnn_bn.ini Applications/ResNet/resnet18.ini \
           Applications/ResNet/resnet18_frozen.ini Applications/CharLM/lstm.ini \
           Applications/CharLM/lstm_lora.ini Applications/CharLM/transformer.ini; do
  case $ini in
    *FashionMNIST*) data=fashion-mnist; args=() ;;
    *) data="synthetic $samples"; args=(--synthetic="$samples") ;;
  esac
  "$bench" "$ini" "$epochs" "${args[@]}" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
c = d["cpu_ms_median"]
print("| %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f%s |" % (sys.argv[1], sys.argv[2],
      d["steps_per_epoch"], c[0], c[-1], d["last_over_first"], d["normalized"],
      d["replay_last_over_first"], "" if d["replay_repeats"] else " (losses vary)"))' "$ini" "$data"
done
