#!/usr/bin/env bash
# The packaging check (docs/install.md#packaging-check; not part of CI: it
# builds everything again and runs the whole test suite inside the package
# build, and it installs packages into this system, so run it as root on a
# scratch Debian 12 machine or container):
#   1. builds the .debs with `dpkg-buildpackage -us -uc -b` from a clean
#      clone of this checkout's HEAD (in a temporary folder: the .debs land
#      beside the source tree, never in the checkout);
#   2. runs lintian on the .changes: any error fails;
#   3. installs the four packages (apt-get install ./*.deb);
#   4. builds the tiny app of test/install/app against /usr with pkg-config
#      and with find_package(nntrainer CONFIG), runs both, and runs the
#      installed CLI and its manual page;
#   5. removes the packages again (when they were not installed before), so
#      the system is left as it was found.
#   scripts/check-debs.sh [OUT_DIR]   (the .debs are copied to OUT_DIR)
# NNT_DEBS_FROM=DIR skips step 1 and checks the .debs and .changes in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
out=${1:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

echo "== build dependencies"
need=(dpkg-dev debhelper lintian fakeroot build-essential)
# the Build-Depends of debian/control, less the build profile marks
mapfile -t bdeps < <(sed -n '/^Build-Depends:/,/^[A-Z]/p' debian/control | sed '1s/^Build-Depends://; /^[A-Z]/d' |
  tr ',' '\n' | sed 's/<[^>]*>//; s/(.*)//; s/[[:space:]]//g' | grep -v '^$' | grep -v '^debhelper-compat')
missing=()
for p in "${need[@]}" "${bdeps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ -n "${NNT_DEBS_FROM:-}" ]; then
  echo "== the .debs of $NNT_DEBS_FROM"
  cp "$NNT_DEBS_FROM"/*.deb "$NNT_DEBS_FROM"/nntrainer_*.changes "$tmp"/
else
  echo "== dpkg-buildpackage -us -uc -b (a clean clone of HEAD $(git rev-parse --short HEAD))"
  git clone -q "$src" "$tmp/nntrainer"
  start=$(date +%s)
  (cd "$tmp/nntrainer" && dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1 ||
    { tail -60 "$tmp/build.log" >&2; echo "FAIL: dpkg-buildpackage" >&2; exit 1; }
  echo "ok: built in $(( $(date +%s) - start )) s:"
  grep -E '^(dpkg-gensymbols|[0-9]+% tests passed|Total Test time)' "$tmp/build.log" || true
  ls -1 "$tmp"/*.deb | sed 's|.*/|  |'
fi

echo "== lintian"
changes=("$tmp"/nntrainer_*.changes)
lintian --info --display-info "${changes[0]}" | tee "$tmp/lintian.log" || true
errors=$(grep -c '^E:' "$tmp/lintian.log" || true)
warnings=$(grep -c '^W:' "$tmp/lintian.log" || true)
echo "lintian: $errors errors, $warnings warnings"
[ "$errors" -eq 0 ] || { echo "FAIL: lintian reports errors" >&2; exit 1; }
[ -z "$out" ] || { mkdir -p "$out"; cp "$tmp"/*.deb "${changes[0]}" "$out"/; }

echo "== install the packages"
pkgs=(libnntrainer0 libnntrainer-dev nntrainer-tools nntrainer-examples)
had=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && had+=("$p")
done
if [ ${#had[@]} -eq 0 ]; then
  trap 'rm -rf "$tmp"; echo "== remove the packages"; DEBIAN_FRONTEND=noninteractive $SUDO apt-get purge -y -qq "${pkgs[@]}" >/dev/null 2>&1 || true' EXIT
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  "$tmp"/libnntrainer0_*.deb "$tmp"/libnntrainer-dev_*.deb \
  "$tmp"/nntrainer-tools_*.deb "$tmp"/nntrainer-examples_*.deb >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; echo "FAIL: apt-get install" >&2; exit 1; }
dpkg-query -W libnntrainer0 libnntrainer-dev nntrainer-tools nntrainer-examples

echo "== the tiny app against /usr"
app=$src/test/install/app
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Werror "$app/app.c" $(pkg-config --cflags --libs nntrainer) -o "$tmp/app-pc"
"$tmp/app-pc"
libs=$(ldd "$tmp/app-pc")
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
case "$libs" in *"libnntrainer.so.0 => "*"lib/$triplet/libnntrainer.so.0 "*) ;; *) echo "FAIL: not the packaged library: $libs" >&2; exit 1 ;; esac
echo "ok: pkg-config ($(pkg-config --modversion nntrainer)): $(pkg-config --cflags --libs nntrainer)"
cmake -S "$app" -B "$tmp/app-cmake" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log" >&2; exit 1; }
grep '^nntrainer_DIR:' "$tmp/app-cmake/CMakeCache.txt"
cmake --build "$tmp/app-cmake" >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log" >&2; exit 1; }
"$tmp/app-cmake/tiny_app"
echo "ok: find_package(nntrainer CONFIG), nntrainer::nntrainer"

echo "== the CLI and the examples"
nntrainer --version
ex=/usr/share/doc/nntrainer-examples/examples
nntrainer summary "$ex/FashionMNIST/mlp.ini" | head -3
man -l /usr/share/man/man1/nntrainer.1.gz >/dev/null 2>&1 || MANWIDTH=80 man nntrainer >/dev/null
echo "ok: nntrainer(1) renders"
echo "== all packaging checks passed"
