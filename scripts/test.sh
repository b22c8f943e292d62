#!/usr/bin/env bash
# Set up, build and run the whole test suite twice: in a normal build and in
# an AddressSanitizer + UndefinedBehaviorSanitizer build. Both must pass.
# Then every fuzz target runs for a short bounded time (docs/fuzzing.md);
# a crash fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
jobs=$(nproc)

echo "== normal build"
bash scripts/build.sh build
(cd build && ctest --output-on-failure -j"$jobs")

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build"
bash scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DNNT_SANITIZE=ON
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j"$jobs")

echo "== fuzz targets, ${NNT_FUZZ_SECONDS:-20}s each"
bash scripts/fuzz.sh "${NNT_FUZZ_SECONDS:-20}"
