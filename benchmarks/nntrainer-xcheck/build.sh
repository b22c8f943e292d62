#!/bin/sh
# Build xcheck (xcheck.cpp) against an NNTrainer build that already exists.
# It reads NNTrainer's internal classes (RunLayerContext, LayerNode), so it
# takes the include paths and definitions of the library's own compile
# command from the build's compile_commands.json: a class laid out under
# other definitions would not match the library.
#
# usage: build.sh NNTRAINER_BUILD_DIR [OUT]      (OUT: ./xcheck)
#   NNTRAINER_BUILD_DIR: the meson build folder holding compile_commands.json
#   and nntrainer/libnntrainer.so, api/ccapi/libccapi-nntrainer.so
set -eu
[ $# -ge 1 ] || { echo "usage: $0 NNTRAINER_BUILD_DIR [OUT]" >&2; exit 2; }
B=$(cd "$1" && pwd)
OUT=${2:-./xcheck}
HERE=$(cd "$(dirname "$0")" && pwd)
for f in compile_commands.json nntrainer/libnntrainer.so api/ccapi/libccapi-nntrainer.so; do
  [ -e "$B/$f" ] || { echo "$B/$f: missing (build NNTrainer first)" >&2; exit 1; }
done
FLAGS=$(python3 - "$B" <<'PY'
import json, os, shlex, sys
b = sys.argv[1]
for e in json.load(open(os.path.join(b, "compile_commands.json"))):
    if e["file"].endswith("/layers/layer_node.cpp") and "libnntrainer.so" in e["output"]:
        out = []
        for a in shlex.split(e["command"])[1:]:
            if a.startswith("-I"):
                p = a[2:]
                out.append("-I" + os.path.normpath(os.path.join(e["directory"], p)))
            elif a.startswith(("-D", "-std=", "-march=", "-mavx", "-mfma")) or a in ("-pthread", "-fopenmp"):
                out.append(a)
        print(" ".join(shlex.quote(a) for a in out))
        break
else:
    sys.exit("no compile command for layer_node.cpp in " + b)
PY
)
eval "set -- $FLAGS"
c++ -O1 -g "$@" -o "$OUT" "$HERE/xcheck.cpp" \
  -L"$B/nntrainer" -L"$B/api/ccapi" -lccapi-nntrainer -lnntrainer -liniparser \
  -Wl,-rpath,"$B/nntrainer" -Wl,-rpath,"$B/api/ccapi"
echo "built $OUT"
