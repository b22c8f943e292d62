#!/usr/bin/env bash
# What `nntrainer train` does under a process memory limit (ulimit -v):
# for each limit, whether it trains (ok), stops with an error (its message),
# is killed by a signal, or hangs (still running after the timeout).
# docs/reliability.md's table of limits comes from it.
#
#   scripts/memlimit-scan.sh [BUILD_DIR] [-- train arguments]
#
# Without arguments it scans Applications/FashionMNIST/mlp.ini (one epoch,
# the Fashion-MNIST files) and each benchmarks/models/*.ini with
# --synthetic=256, from 20 MiB to 1 GiB. LIMITS (KiB, space-separated),
# TIMEOUT (seconds, default 60) and THREADS (NNTRAINER_THREADS) override.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
[ "${1:-}" = "--" ] && shift
cli="$build/nntrainer"
[ -x "$cli" ] || { echo "no $cli (build first)" >&2; exit 2; }
limits=${LIMITS:-"20000 40000 50000 60000 80000 100000 150000 200000 250000 300000 350000 400000 500000 600000 800000 1000000"}
timeout=${TIMEOUT:-60}

scan() { # label, then the train arguments
  local label=$1
  shift
  for kb in $limits; do
    out=$(timeout -k 5 "$timeout" bash -c 'ulimit -v "$1"; shift; exec "$@"' _ "$kb" \
            env ${THREADS:+NNTRAINER_THREADS=$THREADS} "$cli" train "$@" 2>&1)
    rc=$?
    if [ $rc = 0 ]; then
      what="ok"
    elif [ $rc = 124 ] || [ $rc = 137 ]; then
      what="HANG (killed after ${timeout} s)"
    elif [ $rc -gt 128 ]; then
      what="SIGNAL $((rc - 128)): $(echo "$out" | tail -1)"
    else
      what="exit $rc: $(echo "$out" | grep -m1 'nntrainer: error' || echo "$out" | grep -m1 -E 'error|OpenBLAS' || echo "$out" | tail -1)"
    fi
    printf '%-28s %8s KiB  %s\n' "$label" "$kb" "$what"
  done
}

if [ $# -gt 0 ]; then
  scan "$*" "$@"
else
  scan mlp.ini Applications/FashionMNIST/mlp.ini epochs=1 save_path=
  for m in benchmarks/models/*.ini; do
    scan "$(basename "$m") --synthetic" "$m" --synthetic=256 epochs=1 save_path=
  done
fi
