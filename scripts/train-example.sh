#!/usr/bin/env bash
# Set up, build, and train the default example: an MLP on Fashion-MNIST.
# Extra arguments go to `nntrainer train` (e.g. epochs=2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build
exec build/nntrainer train Applications/FashionMNIST/mlp.ini "$@"
