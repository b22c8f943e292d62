#!/usr/bin/env bash
# Install the build into a temporary prefix and build applications against
# the installed copy alone, through pkg-config.
#   test_install.sh BUILD_DIR SOURCE_DIR VERSION [EXTRA_FLAGS...]
# EXTRA_FLAGS go to every compile and link (e.g. the sanitizer flags of the
# build). With the Fashion-MNIST files present, the example capi_mlp is
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

"$CMAKE" --install "$build" --prefix "$P" >"$tmp/install.log"
fail() { echo "FAIL: $*" >&2; cat "$tmp/install.log" >&2; exit 1; }

# What is installed
for f in include/nntrainer.h include/nntrainer-api-common.h include/ml-api-common.h \
         include/nntrainer-ext.h lib/pkgconfig/nntrainer.pc bin/nntrainer; do
  [ -f "$P/$f" ] || fail "$f is not installed"
done
[ -x "$P/bin/nntrainer" ] || fail "bin/nntrainer is not executable"
reals=("$P"/lib/libnntrainer.so.*.*.*)
real=${reals[0]}
[ -f "$real" ] || fail "lib/libnntrainer.so.X.Y.Z is not installed"
[ -L "$P/lib/libnntrainer.so" ] || fail "lib/libnntrainer.so (the link for -lnntrainer) is missing"
soname=$(objdump -p "$real" | awk '/SONAME/ {print $2}')
[ -e "$P/lib/$soname" ] || fail "lib/$soname (the soname link) is missing"
echo "ok: installed library $(basename "$real"), soname $soname, headers, CLI, nntrainer.pc"

# pkg-config, from the installed .pc alone
export PKG_CONFIG_PATH=$P/lib/pkgconfig
[ "$(pkg-config --modversion nntrainer)" = "$version" ] ||
  fail "pkg-config --modversion says '$(pkg-config --modversion nntrainer)', not $version"
flags=$(pkg-config --cflags --libs nntrainer)
echo "ok: pkg-config --cflags --libs nntrainer: $flags"
case "$flags" in *"-I$P/"*|*"-I$tmp"*) ;; *) fail "the include path is not in the prefix: $flags" ;; esac

# The installed CLI runs (it finds the library through its RPATH)
"$P/bin/nntrainer" --version >/dev/null || fail "installed nntrainer --version"
echo "ok: $P/bin/nntrainer --version"

# A tiny application: construct, add a layer, compile, destroy.
cat >"$tmp/app.c" <<'C'
#include <stdio.h>
#include <nntrainer.h>

static int fail(const char *what, int rc) {
  const char *msg = ml_error();
  fprintf(stderr, "%s: %d %s\n", what, rc, msg ? msg : "");
  return 1;
}

int main(void) {
  ml_train_model_h model;
  ml_train_layer_h input, fc;
  int rc;
  if ((rc = ml_train_model_construct(&model)))
    return fail("construct", rc);
  if ((rc = ml_train_layer_create(&input, ML_TRAIN_LAYER_TYPE_INPUT)) ||
      (rc = ml_train_layer_set_property(input, "input_shape=1:1:8", NULL)) ||
      (rc = ml_train_model_add_layer(model, input)))
    return fail("input layer", rc);
  if ((rc = ml_train_layer_create(&fc, ML_TRAIN_LAYER_TYPE_FC)) ||
      (rc = ml_train_layer_set_property(fc, "unit=2 | activation=softmax", NULL)) ||
      (rc = ml_train_model_add_layer(model, fc)))
    return fail("fc layer", rc);
  if ((rc = ml_train_model_compile(model, "loss=cross", "batch_size=4", NULL)))
    return fail("compile", rc);
  if ((rc = ml_train_model_destroy(model)))
    return fail("destroy", rc);
  puts("tiny app: construct, compile, destroy ok");
  return 0;
}
C
# shellcheck disable=SC2086
"$CC" -std=c99 -Wall -Wextra -Werror "${extra[@]}" "$tmp/app.c" $flags -o "$tmp/app"
LD_LIBRARY_PATH=$P/lib "$tmp/app"
# and it really used the installed library (no `ldd | grep -q`: with
# pipefail, grep quitting early can fail the pipe). The loader lists what it
# loads, as ldd would: the host's ldd cannot read a cross-built program
# (scripts/cross-arm64.sh), the program's own loader can.
libs=$(LD_LIBRARY_PATH=$P/lib LD_TRACE_LOADED_OBJECTS=1 "$tmp/app")
case "$libs" in *"$P/lib/libnntrainer"*) ;; *) fail "the app does not load the installed library: $libs" ;; esac

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
LD_LIBRARY_PATH=$P/lib "$tmp/capi_mlp" --train-samples 640 --test-samples 320 --epochs 1
echo "ok: capi_mlp built with pkg-config and run against $P"
