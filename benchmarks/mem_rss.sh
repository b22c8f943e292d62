#!/usr/bin/env bash
# Peak RSS of training against the plan (docs/memory.md, "Plan against
# RSS"): for each model, the process baseline (a 1-parameter model trained
# the same way: libraries, OpenBLAS, the CLI, a plan of 328 bytes), the
# planned total (`nntrainer plan --json`: weights, optimizer state, training
# arena), the datasets' queues (buffer_size 1: 2 batches of inputs and
# labels each, for the training set and the validation set when the INI has
# one; the test set is evaluated after the training arena is released) and
# the peak RSS of `nntrainer train X --synthetic=N` (/usr/bin/time -v). Usage: benchmarks/mem_rss.sh [BUILD_DIR] [MODEL.ini...]
set -euo pipefail
build=${1:-build}
shift || true
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  models=(benchmarks/models/*.ini Applications/FashionMNIST/*.ini Applications/ResNet/resnet18.ini)
fi
cli=$build/nntrainer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/tiny.ini" <<'INI'
[Model]
type = NeuralNetwork
epochs = 1
batch_size = 1
loss = mse
[Optimizer]
type = sgd
learning_rate = 0.1
[in]
type = input
input_shape = 1:1:1
[fc]
type = fully_connected
unit = 1
INI
rss() { # peak RSS in bytes of the command
  local rc=0
  /usr/bin/time -f '%M' -o "$tmp/rss" "$@" > "$tmp/out" 2>&1 || rc=$?
  if [ $rc -ne 0 ]; then
    echo "mem_rss.sh: $* failed:" >&2
    tail -3 "$tmp/out" >&2
    exit 1
  fi
  echo $(( $(tail -1 "$tmp/rss") * 1024 ))
}
base=$(rss "$cli" train "$tmp/tiny.ini" --synthetic=64 epochs=1 save_path=)
printf '| model | batch | baseline | plan total | queue | peak RSS | peak - baseline - plan - queue |\n'
printf '|---|---:|---:|---:|---:|---:|---:|\n'
for m in "${models[@]}"; do
  json=$("$cli" plan "$m" --json)
  # a batch's bytes: the input and label tensors of the plan that copies the
  # batch (the default plan on the CPU reads it in the queue: no input there)
  copy=$("$cli" plan "$m" memory_optimization=false --json)
  read -r total queue < <(python3 -c '
import json, sys
p, c = (json.loads(t) for t in sys.stdin.read().split("\n@@\n"))
k = c["kinds"]
print(p["total_bytes"], 2 * (k["input"] + k["label"]))' <<< "$json"$'\n@@\n'"$copy")
  grep -q '^\[valid_set\]' "$m" && queue=$((2 * queue))
  batch=$(grep -m1 -i '^batch_size' "$m" | tr -dc 0-9)
  # 4 steps (the validation and test sets get a quarter: one batch); the
  # first step allocates what a run allocates once
  peak=$(rss "$cli" train "$m" --synthetic=$((4 * batch)) epochs=1 save_path=)
  printf '| %s | %s | %d | %d | %d | %d | %d |\n' "$m" "$batch" "$base" "$total" "$queue" "$peak" \
    $((peak - base - total - queue))
done
