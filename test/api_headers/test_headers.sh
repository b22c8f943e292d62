#!/usr/bin/env bash
# The public headers compile on their own, together, as strict C99 and C11
# (-pedantic) and as C++11, and their extern "C" linkage lets a C++ program
# link against the library.
#   test_headers.sh INCLUDE_DIR LIB_DIR [EXTRA_FLAGS...]
# EXTRA_FLAGS go to every compile and link (e.g. the sanitizer flags of the
# build the library comes from).
set -euo pipefail
inc=$1 libdir=$2
shift 2
extra=("$@")
CC=${CC:-cc} CXX=${CXX:-c++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR
headers=(ml-api-common.h nntrainer-api-common.h nntrainer.h nntrainer-ext.h)

cflags=(-Wall -Wextra -Werror -pedantic -I"$inc")
for std in c99 c11; do
  for h in "${headers[@]}"; do # each header alone: it includes what it needs
    printf '#include <%s>\nint nnt_header_test_dummy;\n' "$h" >"$tmp/one.c"
    "$CC" -std=$std "${cflags[@]}" "${extra[@]}" -c "$tmp/one.c" -o "$tmp/one.o"
    echo "ok: $h alone as $std"
  done
done

cat >"$tmp/all.c" <<'C'
#include <ml-api-common.h>
#include <nntrainer-api-common.h>
#include <nntrainer.h>
#include <nntrainer-ext.h>
/* twice: the include guards hold */
#include <nntrainer.h>
#include <nntrainer-ext.h>

int main(void) {
  ml_train_model_h model;
  if (ml_train_model_construct(&model) != ML_ERROR_NONE)
    return 1;
  ml_train_ext_memory_report_s report = {0};
  (void)report;
  ml_train_datagen_cb cb = 0;
  (void)cb;
  return ml_train_model_destroy(model) == ML_ERROR_NONE ? 0 : 1;
}
C
for std in c99 c11; do
  "$CC" -std=$std "${cflags[@]}" "${extra[@]}" -c "$tmp/all.c" -o "$tmp/all_$std.o"
  echo "ok: all four headers as $std -pedantic"
done

# C++: compile pedantic as well, then link a program and run it.
cat >"$tmp/app.cpp" <<'CPP'
#include <nntrainer.h>
#include <nntrainer-ext.h>
#include <cstdio>

int main() {
  ml_train_model_h model = nullptr;
  int rc = ml_train_model_construct(&model);
  if (rc != ML_ERROR_NONE) {
    const char *msg = ml_error();
    std::fprintf(stderr, "construct: %d %s\n", rc, msg ? msg : "");
    return 1;
  }
  rc = ml_train_model_destroy(model);
  if (rc != ML_ERROR_NONE)
    return 1;
  /* a bad call fails with a message */
  if (ml_train_model_destroy(nullptr) != ML_ERROR_INVALID_PARAMETER || !ml_error())
    return 1;
  std::puts("C++ construct/destroy ok");
  return 0;
}
CPP
cxxflags=(-std=c++11 -Wall -Wextra -Werror -I"$inc")
"$CXX" "${cxxflags[@]}" "${extra[@]}" -c "$tmp/app.cpp" -o "$tmp/app_plain.o"
echo "ok: C++11"
"$CXX" "${cxxflags[@]}" -pedantic "${extra[@]}" -c "$tmp/app.cpp" -o "$tmp/app.o"
echo "ok: C++11 -pedantic"
"$CXX" "${extra[@]}" "$tmp/app.o" -L"$libdir" -lnntrainer -Wl,-rpath,"$libdir" -o "$tmp/app"
"$tmp/app"
