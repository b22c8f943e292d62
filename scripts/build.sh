#!/usr/bin/env bash
# Configure and build into a folder: scripts/build.sh [DIR] [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DNNT_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
