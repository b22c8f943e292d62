#!/usr/bin/env bash
# Build NNTrainer's own Tizen C API test suite (test/tizen_capi in its
# repository: five googletest programs) against this library, run every
# case and print a summary: passed, failed, and excluded with the reason.
#
#   scripts/nntrainer-capi-tests.sh [--asan] NNTRAINER_SRC_DIR [BUILD_DIR]
#
# NNTRAINER_SRC_DIR is a checkout (or an extracted tree) of NNTrainer; only
# its test/tizen_capi/unittest_tizen_capi*.cpp are used. Nothing is
# downloaded: the helpers those tests include come from test/nntrainer_capi/
# (our own stand-ins for NNTrainer's test utilities), and the data files
# they read are made by test/nntrainer_capi/gen_res.c. googletest comes from
# Debian's libgtest-dev, installed when missing. BUILD_DIR (default
# build-nntrainer-capi, or build-nntrainer-capi-asan) holds the library
# build, the test programs, the resource files and the logs. --asan builds
# the library and the tests with AddressSanitizer and UBSan (leaks checked).
#
# This is a developer's check, not part of CI (CI has no NNTrainer source).
# Exit status: 0 when every case not excluded passes.
set -euo pipefail

usage() {
  echo "usage: $0 [--asan] NNTRAINER_SRC_DIR [BUILD_DIR]" >&2
  exit 2
}
asan=0
if [ "${1:-}" = "--asan" ]; then
  asan=1
  shift
fi
[ $# -ge 1 ] && [ $# -le 2 ] || usage
root=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$1" && pwd) || usage
suffix=""
[ $asan -eq 0 ] || suffix=-asan
build=${2:-$root/build-nntrainer-capi$suffix}
build=$(mkdir -p "$build" && cd "$build" && pwd)
suite=$src/test/tizen_capi
programs=(unittest_tizen_capi unittest_tizen_capi_layer unittest_tizen_capi_optimizer
          unittest_tizen_capi_lr_scheduler unittest_tizen_capi_dataset)
for p in "${programs[@]}"; do
  [ -f "$suite/$p.cpp" ] || { echo "error: $suite/$p.cpp not found" >&2; exit 2; }
done

# Cases left out of the count, with the reason: each pins NNTrainer's
# random initialisation (the exact loss and accuracy after training from
# NNTrainer's random weights on NNTrainer's own data files) or NNTrainer's
# own known bug. docs/capi.md lists the same ones. They still run, after the
# others: each must fail only where it pins NNTrainer's values, that is
# every failure message must match its pattern (an extended regular
# expression over the message joined into one line); one that fails
# anywhere else, or dies, counts as failed.
excl_name=() excl_pattern=() excl_reason=() excl_note=()
exclude() { excl_name+=("$1") excl_pattern+=("$2") excl_reason+=("$3"); }
metrics='^The difference between std::strtof\(summary[123], nullptr\) and (train_loss|valid_loss|valid_accuracy) is'
exclude nntrainer_capi_nnmodel.train_01_p "$metrics" \
  "pins NNTrainer's random initialisation: expects train loss 3.911289, valid loss 2.933979, valid accuracy 10.4167% after 1 epoch from NNTrainer's initial weights on its data files"
exclude nntrainer_capi_nnmodel.train_with_single_param_01_p "$metrics" \
  "pins NNTrainer's random initialisation: expects train loss 3.77080, valid loss 3.18020, valid accuracy 10.4167% after 2 epochs from NNTrainer's initial weights on its data files"
exclude nntrainer_capi_nnmodel.train_with_file_01_p "$metrics" \
  "pins NNTrainer's random initialisation: expects train loss 2.11176, valid loss 2.21936, valid accuracy 16.6667% after 2 epochs from NNTrainer's initial weights on its data files"
exclude nntrainer_capi_nnmodel.train_with_generator_01_p "$metrics" \
  "pins NNTrainer's random initialisation: expects train loss 2.20755, valid loss 1.98047, valid accuracy 58.3333% after 2 epochs from NNTrainer's initial weights on its data files"
exclude nntrainer_capi_nnmodel.getLayer_05_n \
  '^Expected equality of these values: status Which is: 0 ML_ERROR_INVALID_PARAMETER Which is: -22$' \
  "pins NNTrainer's known bug, marked in the test ('need to fix bug (Unable to get renamed layer)'): it expects ml_train_model_get_layer to fail for a layer's new name after ml_train_layer_set_property renamed it; here the renamed layer is found under its new name"

# ---------------------------------------------------------------- gtest
if ! dpkg-query -W -f='${Status}' libgtest-dev 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "nntrainer-capi-tests: installing libgtest-dev"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libgtest-dev
fi
bash "$root/scripts/setup.sh" >/dev/null

# ---------------------------------------------------------------- build
rm -rf "$build/logs"
mkdir -p "$build/bin" "$build/res" "$build/logs"
echo "nntrainer-capi-tests: building the library in $build/lib"
san=() cmake_args=(-DCMAKE_BUILD_TYPE=Release -DNNT_SANITIZE=OFF)
if [ $asan -eq 1 ]; then
  san=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DNNT_SANITIZE=ON)
fi
cmake -S "$root" -B "$build/lib" "${cmake_args[@]}" -DNNT_BUILD_TESTS=OFF \
  -DNNT_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build/lib" --target nntrainer -j"$(nproc)" >/dev/null
libdir=$build/lib
shim=$root/test/nntrainer_capi
CXXFLAGS=(-std=c++17 -O1 -g -Wno-deprecated-declarations "${san[@]+"${san[@]}"}" -I"$shim"
          -I"$root/api/include")
echo "nntrainer-capi-tests: building the test programs in $build/bin"
g++ "${CXXFLAGS[@]}" -c "$shim/test_util.cpp" -o "$build/bin/test_util.o"
for p in "${programs[@]}"; do
  g++ "${CXXFLAGS[@]}" "$suite/$p.cpp" "$build/bin/test_util.o" -o "$build/bin/$p" \
    -L"$libdir" -Wl,-rpath,"$libdir" -lnntrainer -lgtest -pthread
done
cc -std=c11 -O2 -Wall -Wextra -Werror "$shim/gen_res.c" -o "$build/bin/gen_res"
"$build/bin/gen_res" "$build/res"

# ---------------------------------------------------------------- run
# run PROGRAM LOG FILTER: run a test program in the resource folder.
run() {
  set +e
  (cd "$build/res" && NNTRAINER_RESOURCE_PATH="$build/res" OPENBLAS_NUM_THREADS=1 \
     ASAN_OPTIONS=detect_leaks=1 "$build/bin/$1" --gtest_filter="$3") >"$2" 2>&1
  local status=$?
  set -e
  return $status
}

# outcome LOG NAME: "ok", "failed" or "died" for one case of a log.
outcome() {
  awk -v name="$2" '
    $0 == "[ RUN      ] " name { inside = 1; next }
    inside && index($0, "[       OK ] " name " (") == 1 { print "ok"; found = 1; exit }
    inside && index($0, "[  FAILED  ] " name " (") == 1 { print "failed"; found = 1; exit }
    END { if (!found) print "died" }' "$1"
}

# messages LOG NAME: each failure message of one case, on one line.
messages() {
  awk -v name="$2" '
    function flush() { if (msg != "") print msg; msg = "" }
    $0 == "[ RUN      ] " name { inside = 1; next }
    inside && /^\[ +(OK|FAILED) +\] / { flush(); exit }
    inside && / Failure$/ { flush(); started = 1; next }
    inside && started { gsub(/^ +| +$/, ""); msg = (msg == "" ? $0 : msg " " $0) }
    END { flush() }' "$1"
}

filter="-"
for x in "${excl_name[@]}"; do
  filter+="$x:"
done
filter=${filter%:}

total=0 passed=0 failed=0 n_excluded=0
failures=()
for p in "${programs[@]}"; do
  log=$build/logs/$p.log
  listed=$(cd "$build/res" && NNTRAINER_RESOURCE_PATH="$build/res" "$build/bin/$p" \
    --gtest_list_tests | awk '/^[^ ]/ { suite = $1; next } /^  [^ ]/ { print suite $1 }')
  run "$p" "$log" "$filter" || true
  ok=0 n=0
  while read -r name; do
    [ -n "$name" ] || continue
    n=$((n + 1))
    skip=0
    for x in "${excl_name[@]}"; do [ "$x" = "$name" ] && skip=1; done
    [ $skip -eq 1 ] && continue
    case $(outcome "$log" "$name") in
      ok) ok=$((ok + 1)) ;;
      failed) failures+=("$name ($p)") ;;
      died) failures+=("$name ($p: the program died during it or before; see $log)") ;;
    esac
  done <<<"$listed"
  total=$((total + n))
  passed=$((passed + ok))
  # the excluded cases of this program, in one run
  mine=""
  for name in "${excl_name[@]}"; do
    printf '%s\n' "$listed" | grep -qxF -- "$name" && mine+="$name:"
  done
  if [ -n "$mine" ]; then
    xlog=$build/logs/$p.excluded.log
    run "$p" "$xlog" "${mine%:}" || true
    for i in "${!excl_name[@]}"; do
      name=${excl_name[$i]}
      case ":$mine" in *":$name:"*) ;; *) continue ;; esac
      n_excluded=$((n_excluded + 1))
      case $(outcome "$xlog" "$name") in
        ok) excl_note[$i]="ran and passed" ;;
        died) failures+=("$name ($p, excluded: the program died during it; see $xlog)") ;;
        failed)
          set +e
          other=$(messages "$xlog" "$name" | grep -vE -- "${excl_pattern[$i]}")
          gs=$?
          set -e
          if [ $gs -gt 1 ]; then
            echo "error: bad pattern for $name" >&2
            exit 2
          elif [ -n "$other" ]; then
            failures+=("$name ($p, excluded, but it also fails where it pins nothing: ${other%%$'\n'*})")
          else
            excl_note[$i]="ran; fails only where it pins NNTrainer's values"
          fi ;;
      esac
    done
  fi
  for l in "$log" "$build/logs/$p.excluded.log"; do
    if [ -f "$l" ] && grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$l"; then
      failures+=("$p: a sanitizer report in $l")
    fi
  done
  printf '%-34s %3d cases, %3d passed (log: %s)\n' "$p" "$n" "$ok" "$log"
done
failed=${#failures[@]}

echo
echo "NNTrainer's C API test suite against nntrainer ($src)"
echo "  cases:    $total"
echo "  passed:   $passed"
echo "  failed:   $failed"
for f in "${failures[@]+"${failures[@]}"}"; do
  echo "    - $f"
done
echo "  excluded: $n_excluded"
for i in "${!excl_name[@]}"; do
  echo "    - ${excl_name[$i]}: ${excl_reason[$i]}"
  if [ -n "${excl_note[$i]:-}" ]; then
    echo "      (${excl_note[$i]})"
  fi
done
[ "$failed" -eq 0 ] && [ $((passed + n_excluded)) -eq "$total" ]
