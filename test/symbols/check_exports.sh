#!/usr/bin/env bash
# The shared library exports the public C API and nothing else: its dynamic
# symbol table (defined symbols) must be exactly the functions that the
# public headers declare, each with the version node of cmake/nntrainer.map.
#   check_exports.sh LIBRARY INCLUDE_DIR
# Fails naming every symbol exported without a declaration (an internal
# function leaking) and every declared function not exported.
set -euo pipefail
lib=$1 inc=$2
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR

# Declared: the function names of the four headers, read after the
# preprocessor (so comments and examples in them do not count).
printf '#include <ml-api-common.h>\n#include <nntrainer-api-common.h>\n#include <nntrainer.h>\n#include <nntrainer-ext.h>\n' >"$tmp/all.c"
"$CC" -E -P -I"$inc" "$tmp/all.c" >"$tmp/all.i"
grep -oE '\bml_[A-Za-z0-9_]+[[:space:]]*\(' "$tmp/all.i" | tr -d '( \t' | sort -u >"$tmp/declared"

# Exported: defined dynamic symbols, less the version node itself (type A).
nm -D --defined-only --with-symbol-versions "$lib" | awk '$2 != "A" {print $3}' | sort -u >"$tmp/exported_v"
sed 's/@.*//' "$tmp/exported_v" | sort -u >"$tmp/exported"

rc=0
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
unversioned=$(grep -v '@@NNTRAINER_' "$tmp/exported_v" || true)
if [ -n "$extra" ]; then
  echo "FAIL: $lib exports symbols no public header declares:" >&2
  echo "$extra" | sed 's/^/  /' >&2
  rc=1
fi
if [ -n "$missing" ]; then
  echo "FAIL: functions of the public headers ($inc) that $lib does not export:" >&2
  echo "$missing" | sed 's/^/  /' >&2
  rc=1
fi
if [ -n "$unversioned" ]; then
  echo "FAIL: exported without the NNTRAINER_ version node of cmake/nntrainer.map:" >&2
  echo "$unversioned" | sed 's/^/  /' >&2
  rc=1
fi
[ "$(wc -l <"$tmp/declared")" -gt 0 ] || { echo "FAIL: no function found in $inc" >&2; exit 1; }
[ $rc -eq 0 ] || exit $rc
echo "ok: $(wc -l <"$tmp/exported") exported symbols = the $(wc -l <"$tmp/declared") functions of the public headers, all versioned"
