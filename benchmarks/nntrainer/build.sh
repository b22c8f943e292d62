#!/usr/bin/env bash
# Builds upstream NNTrainer (Samsung's C++ library, the one this project
# reimplements) as a release build, then links benchmarks/nntrainer-xcheck/xcheck.cpp
# against it. The resulting OUT_DIR/xcheck is what the speed and memory comparisons
# and the golden-file tools run (`xcheck train X.ini OUT.bin`).
#
# Benchmark recipe only: CI never runs this script.
# Revision measured: nnstreamer/nntrainer 65dccdec8ce33d0cf3d971e45e89e2526c3490f5
# (2025-12-05). Other revisions may need other meson options; the script warns.
#
# Usage: benchmarks/nntrainer/build.sh NNTRAINER_CHECKOUT OUT_DIR [XCHECK_CPP]
#   NNTRAINER_CHECKOUT  a work tree of github.com/nnstreamer/nntrainer. Large binary
#                       files (Applications/*.tflite, packaging/*.tar.gz, ...) may be
#                       missing from it: nothing built here reads them.
#   OUT_DIR             gets build/ (meson), pkgconfig/ (if needed) and xcheck.
#   XCHECK_CPP          defaults to ../nntrainer-xcheck/xcheck.cpp next to this script.
# Environment: JOBS (ninja jobs, default 2), NO_APT=1 (skip the apt-get step).
#
# Debian 12 packages: meson ninja-build pkg-config g++ python3 libiniparser-dev
# libopenblas-dev libgtest-dev libgmock-dev cmake time. When run as root the script
# installs them with apt-get. gtest/gmock are needed only because NNTrainer's top
# meson.build looks them up (and would otherwise fetch a subproject) even with tests off.
#
# Build choices: buildtype=release (-O3; NNTrainer itself adds -march=native -mavx2
# -mfma on x86_64), werror=false, the system OpenBLAS found through pkg-config,
# OpenMP on, nntr-num-threads=1, logging left at its default (on: messages, errors
# included, go to ./logs/ under the working directory). Applications, tests, the C
# API, nnstreamer, TFLite/ONNX, fp16, OpenCL/cuBLAS, NPU, ruy, BiQGEMM and benchmarks
# are off. Only the two shared libraries xcheck needs are built.
set -euo pipefail

want_rev=65dccdec8ce33d0cf3d971e45e89e2526c3490f5
here=$(cd "$(dirname "$0")" && pwd)

if [ $# -lt 2 ]; then
  sed -n '11,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
xcheck_src=${3:-$here/../nntrainer-xcheck/xcheck.cpp}
xcheck_src=$(cd "$(dirname "$xcheck_src")" && pwd)/$(basename "$xcheck_src")
jobs=${JOBS:-2}
build=$out/build

[ -f "$src/meson_options.txt" ] || { echo "build.sh: $src is not NNTrainer" >&2; exit 2; }
[ -f "$xcheck_src" ] || { echo "build.sh: no $xcheck_src" >&2; exit 2; }

# 1. Packages.
pkgs=(meson ninja-build pkg-config g++ python3 libiniparser-dev libopenblas-dev
  libgtest-dev libgmock-dev cmake time)
if [ "${NO_APT:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
fi

rev=$(git -C "$src" rev-parse HEAD 2> /dev/null || echo unknown)
if [ "$rev" != "$want_rev" ]; then
  echo "build.sh: warning: checkout is at $rev, the recipe was measured at $want_rev" >&2
fi

# 2. Debian's libiniparser-dev has no pkg-config file; NNTrainer wants one (else it
# tries to download iniparser as a subproject).
if ! pkg-config --exists iniparser; then
  inc=/usr/include/iniparser
  [ -f "$inc/iniparser.h" ] || inc=/usr/include
  lib=$(dirname "$(gcc -print-file-name=libiniparser.so)")
  mkdir -p "$out/pkgconfig"
  cat > "$out/pkgconfig/iniparser.pc" << EOF
Name: iniparser
Description: stand-in written by benchmarks/nntrainer/build.sh
Version: 4.1
Cflags: -I$inc
Libs: -L$lib -liniparser
EOF
  export PKG_CONFIG_PATH=$out/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
fi
pkg-config --exists openblas || { echo "build.sh: pkg-config finds no openblas" >&2; exit 1; }

# 3. Configure and build NNTrainer.
opts=(
  --buildtype=release --prefix="$out/install"
  # GCC 12 reports a stringop-overflow in nntr_ggml_impl.cpp; NNTrainer builds with -Werror.
  -Dwerror=false
  -Denable-blas=true -Denable-openmp=true -Dnntr-num-threads=1 -Domp-num-threads=1
  -Denable-ccapi=true -Denable-capi=disabled -Dml-api-support=disabled
  -Denable-app=false -Dinstall-app=false -Denable-test=false -Denable-long-test=false
  -Denable-nnstreamer-tensor-filter=disabled -Denable-nnstreamer-tensor-trainer=disabled
  -Denable-nnstreamer-backbone=false
  -Denable-tflite-backbone=false -Denable-tflite-interpreter=false
  -Denable-onnx-interpreter=false
  -Denable-fp16=false -Denable-opencl=false -Denable-cublas=false -Denable-npu=false
  -Denable-ruy=false -Denable-biqgemm=false -Denable-benchmarks=false
)
start=$(date +%s)
if [ -f "$build/build.ninja" ]; then
  meson setup --reconfigure "$build" "$src" "${opts[@]}"
else
  meson setup "$build" "$src" "${opts[@]}"
fi
ninja -C "$build" -j"$jobs" nntrainer/libnntrainer.so api/ccapi/libccapi-nntrainer.so

# 4. xcheck uses NNTrainer's internal headers (RunLayerContext, LayerNode, Tensor), so
# it is compiled with the include paths, defines and machine flags NNTrainer's own
# ccapi source was compiled with, read from compile_commands.json.
flags=$out/xcheck.flags
python3 - "$build/compile_commands.json" > "$flags" << 'PY'
import json, shlex, sys
for e in json.load(open(sys.argv[1])):
    if e["file"].endswith("api/ccapi/src/factory.cpp") and ".so.p" in e["output"]:
        args = e.get("arguments") or shlex.split(e["command"])
        break
else:
    sys.exit("build.sh: factory.cpp not in compile_commands.json")
keep = ("-I", "-D", "-std=", "-O", "-m", "-f", "-pthread")
drop = ("-MD", "-MQ", "-MF", "-fdiagnostics-color")
skip = False
for a in args[1:]:
    if skip:
        skip = False
        continue
    if a in ("-o", "-c", "-MQ", "-MF"):
        skip = True
        continue
    if a.startswith(keep) and not a.startswith(drop):
        sys.stdout.write(a + "\0")
PY
mapfile -d '' cflags < "$flags"
libdirs=("$build/nntrainer" "$build/api/ccapi")
# Relative -I paths in the flags are relative to the build directory.
(cd "$build" && g++ "${cflags[@]}" $(pkg-config --cflags iniparser openblas) \
  -o "$out/xcheck" "$xcheck_src" \
  -L"${libdirs[0]}" -L"${libdirs[1]}" -Wl,-rpath,"${libdirs[0]}:${libdirs[1]}" \
  -lccapi-nntrainer -lnntrainer $(pkg-config --libs iniparser openblas) -fopenmp)
echo "build.sh: NNTrainer $rev built in $(( $(date +%s) - start )) s; binary: $out/xcheck"
