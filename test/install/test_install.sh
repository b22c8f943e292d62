#!/usr/bin/env bash
# Install the build into a temporary prefix and build applications against
# the installed copy alone, through pkg-config and through the CMake package
# (find_package(nntrainer CONFIG), the target nntrainer::nntrainer).
#   test_install.sh BUILD_DIR SOURCE_DIR VERSION [EXTRA_FLAGS...]
# EXTRA_FLAGS go to every compile and link (e.g. the sanitizer flags of the
# build; NNT_LIBDIR is CMAKE_INSTALL_LIBDIR). With the Fashion-MNIST files present, the example capi_mlp is
# built from its sources and trained on a few samples too.
set -euo pipefail
build=$1 src=$2 version=$3
shift 3
extra=("$@")
CC=${CC:-cc}
CMAKE=${CMAKE:-cmake}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR
P=$tmp/prefix
# the library folder under the prefix (CMAKE_INSTALL_LIBDIR: lib, or
# lib/<triplet> in a Debian build)
L=${NNT_LIBDIR:-lib}

"$CMAKE" --install "$build" --prefix "$P" >"$tmp/install.log"
fail() { echo "FAIL: $*" >&2; cat "$tmp/install.log" >&2; exit 1; }

# What is installed
for f in include/nntrainer.h include/nntrainer-api-common.h include/ml-api-common.h \
         include/nntrainer-ext.h $L/pkgconfig/nntrainer.pc bin/nntrainer \
         $L/cmake/nntrainer/nntrainerConfig.cmake $L/cmake/nntrainer/nntrainerConfigVersion.cmake \
         $L/cmake/nntrainer/nntrainerTargets.cmake; do
  [ -f "$P/$f" ] || fail "$f is not installed"
done
[ -x "$P/bin/nntrainer" ] || fail "bin/nntrainer is not executable"
reals=("$P"/$L/libnntrainer.so.*.*.*)
real=${reals[0]}
[ -f "$real" ] || fail "$L/libnntrainer.so.X.Y.Z is not installed"
[ -L "$P/$L/libnntrainer.so" ] || fail "$L/libnntrainer.so (the link for -lnntrainer) is missing"
soname=$(objdump -p "$real" | awk '/SONAME/ {print $2}')
[ -e "$P/$L/$soname" ] || fail "$L/$soname (the soname link) is missing"
echo "ok: installed library $(basename "$real"), soname $soname, headers, CLI, nntrainer.pc, CMake package"

# pkg-config, from the installed .pc alone
export PKG_CONFIG_PATH=$P/$L/pkgconfig
[ "$(pkg-config --modversion nntrainer)" = "$version" ] ||
  fail "pkg-config --modversion says '$(pkg-config --modversion nntrainer)', not $version"
flags=$(pkg-config --cflags --libs nntrainer)
echo "ok: pkg-config --cflags --libs nntrainer: $flags"
case "$flags" in *"-I$P/"*|*"-I$tmp"*) ;; *) fail "the include path is not in the prefix: $flags" ;; esac

# The installed CLI runs (it links the library's code statically)
"$P/bin/nntrainer" --version >/dev/null || fail "installed nntrainer --version"
echo "ok: $P/bin/nntrainer --version"

# A tiny application (app/app.c: construct, add a layer, compile, destroy),
# built with pkg-config ...
# shellcheck disable=SC2086
"$CC" -std=c99 -Wall -Wextra -Werror "${extra[@]}" "$src/test/install/app/app.c" $flags -o "$tmp/app"
LD_LIBRARY_PATH=$P/$L "$tmp/app"
# and it really used the installed library (no `ldd | grep -q`: with
# pipefail, grep quitting early can fail the pipe). The loader lists what it
# loads, as ldd would: the host's ldd cannot read a cross-built program
# (scripts/cross-arm64.sh), the program's own loader can.
libs=$(LD_LIBRARY_PATH=$P/$L LD_TRACE_LOADED_OBJECTS=1 "$tmp/app")
case "$libs" in *"$P/$L/libnntrainer"*) ;; *) fail "the app does not load the installed library: $libs" ;; esac
echo "ok: tiny app built with pkg-config"

# ... and with CMake: find_package(nntrainer CONFIG) from the prefix alone.
unset PKG_CONFIG_PATH
"$CMAKE" -S "$src/test/install/app" -B "$tmp/app-cmake" -DCMAKE_PREFIX_PATH="$P" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_C_COMPILER="$CC" \
  -DCMAKE_C_FLAGS="-Wall -Wextra -Werror ${extra[*]}" -DCMAKE_EXE_LINKER_FLAGS="${extra[*]}" \
  >"$tmp/app-cmake.log" 2>&1 || { cat "$tmp/app-cmake.log" >&2; fail "cmake configure of the app"; }
grep -q "^nntrainer_DIR:PATH=$P/$L/cmake/nntrainer\$" "$tmp/app-cmake/CMakeCache.txt" ||
  fail "find_package found nntrainer elsewhere: $(grep '^nntrainer_DIR' "$tmp/app-cmake/CMakeCache.txt")"
"$CMAKE" --build "$tmp/app-cmake" >>"$tmp/app-cmake.log" 2>&1 ||
  { cat "$tmp/app-cmake.log" >&2; fail "cmake build of the app"; }
"$tmp/app-cmake/tiny_app"
libs=$(LD_TRACE_LOADED_OBJECTS=1 "$tmp/app-cmake/tiny_app")
case "$libs" in *"$P/$L/libnntrainer"*) ;; *) fail "the CMake app does not load the installed library: $libs" ;; esac
echo "ok: tiny app built with find_package(nntrainer CONFIG), target nntrainer::nntrainer"
export PKG_CONFIG_PATH=$P/$L/pkgconfig

# The example capi_mlp, built from its sources against the installed copy.
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "skipped: capi_mlp (no $data; install dataset-fashion-mnist)"
  exit 0
fi
ex=$src/Applications/CAPI
# shellcheck disable=SC2086
"$CC" -std=c11 -Wall -Wextra -Werror "${extra[@]}" -I"$ex" "$ex/mlp_layers.c" "$ex/fashion_mnist.c" \
  $flags -lz -o "$tmp/capi_mlp"
LD_LIBRARY_PATH=$P/$L "$tmp/capi_mlp" --train-samples 640 --test-samples 320 --epochs 1
echo "ok: capi_mlp built with pkg-config and run against $P"
