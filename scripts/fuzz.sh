#!/usr/bin/env bash
# Build the libFuzzer targets (test/fuzz) in build-fuzz/ with clang and run
# each for a bounded time: docs/fuzzing.md.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# SECONDS_PER_TARGET defaults to 60; TARGETs are ini, weights, idx, rawfile
# and capi (default: all). Each target starts from its seeds
# (test/fuzz/corpus/TARGET) and regression files (test/fuzz/regress/TARGET)
# and keeps what it finds in OUT/corpus/TARGET, so a later run goes on from
# there. A crash, leak, timeout or broken promise is written to
# OUT/crashes/TARGET/ and makes the script fail (after the other targets
# ran). OUT is build-fuzz/out unless NNT_FUZZ_OUT says otherwise; CC picks
# the compiler (default clang-14, else clang); extra libFuzzer flags go in
# NNT_FUZZ_FLAGS (e.g. "-jobs=4 -workers=4").
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
case "$secs" in '' | *[!0-9]*) echo "fuzz.sh: SECONDS_PER_TARGET must be a number" >&2; exit 2 ;; esac
all=(ini weights idx rawfile capi)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  case " ${all[*]} " in *" $t "*) ;; *) echo "fuzz.sh: unknown target '$t' (${all[*]})" >&2; exit 2 ;; esac
done

cc=${CC:-}
if [ -z "$cc" ]; then
  cc=$(command -v clang-14 || command -v clang || true)
fi
[ -n "$cc" ] || { echo "fuzz.sh: clang not found (scripts/setup.sh installs clang-14)" >&2; exit 2; }
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DNNT_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" >/dev/null

out=${NNT_FUZZ_OUT:-build-fuzz/out}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for t in "${targets[@]}"; do
  case $t in
    ini) max_len=8192 ;;
    weights) max_len=4096 ;;
    *) max_len=4096 ;;
  esac
  dict=()
  [ -f "test/fuzz/$t.dict" ] && dict=("-dict=test/fuzz/$t.dict")
  dirs=("$out/corpus/$t" "test/fuzz/corpus/$t")
  [ -d "test/fuzz/regress/$t" ] && dirs+=("test/fuzz/regress/$t")
  mkdir -p "$out/corpus/$t" "$out/crashes/$t"
  echo "== fuzz $t for ${secs}s"
  before=$(find "$out/crashes/$t" -type f | wc -l)
  # shellcheck disable=SC2086
  rc=0
  "build-fuzz/test/fuzz/fuzz_$t" -max_total_time="$secs" -max_len="$max_len" \
    -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/crashes/$t/" "${dict[@]}" ${NNT_FUZZ_FLAGS:-} "${dirs[@]}" \
    >"$out/$t.log" 2>&1 || rc=$?
  # with -ignore_crashes (fork mode) the exit status stays 0: count the files
  if [ $rc -ne 0 ] || [ "$(find "$out/crashes/$t" -type f | wc -l)" -ne "$before" ]; then
    failed+=("$t")
    tail -n 60 "$out/$t.log"
  fi
  # the last status line: executions, coverage (cov, ft), corpus size
  grep -E '^#[0-9]+' "$out/$t.log" | tail -n 1 || true
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${failed[*]} failed; inputs in $out/crashes/ (replay: build-fuzz/test/fuzz/fuzz_TARGET FILE)" >&2
  exit 1
fi
echo "fuzz.sh: no crash in ${targets[*]}"
