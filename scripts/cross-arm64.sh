#!/usr/bin/env bash
# Cross-build nntrainer for arm64 (aarch64) on a Debian 12 amd64 host and run
# the whole test suite under qemu-user-static (docs/cross-arm64.md):
#   scripts/cross-arm64.sh [--no-install] [BUILD_DIR (build-arm64)] [extra cmake args]
# As root, it first installs what it needs from Debian's packages: the arm64
# architecture for dpkg, crossbuild-essential-arm64, qemu-user-static and the
# arm64 (multiarch) -dev packages the project builds against. Nothing is
# installed when an :arm64 package would remove an amd64 one (a -dev package
# that is not Multi-Arch: same replaces the host's): the script stops and
# says which. The Vulkan backend is off: qemu has no Vulkan device, and a
# backend that is built must have its tests run.
set -euo pipefail
cd "$(dirname "$0")/.."

install=1
if [ "${1:-}" = "--no-install" ]; then
  install=0
  shift
fi
dir=${1:-build-arm64}
shift || true
jobs=$(nproc) # before OMP_NUM_THREADS is set below: nproc obeys it

# What the cross build needs: the cross compilers, the emulator, and the arm64
# libraries and headers of OpenBLAS, zlib and cmocka (the tests). cmake and
# pkg-config run on the host.
HOST_PKGS=(crossbuild-essential-arm64 qemu-user-static cmake pkg-config)
ARM64_PKGS=(libopenblas-dev:arm64 zlib1g-dev:arm64 libcmocka-dev:arm64)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

if [ "$install" = 1 ]; then
  missing=()
  for p in "${HOST_PKGS[@]}" "${ARM64_PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -gt 0 ]; then
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
      echo "cross-arm64: dpkg --add-architecture arm64"
      $SUDO dpkg --add-architecture arm64
    fi
    $SUDO apt-get update -qq
    # simulate first: an install that removes anything is not done
    removed=$($SUDO apt-get install -s --no-install-recommends "${missing[@]}" | grep '^Remv' || true)
    if [ -n "$removed" ]; then
      echo "cross-arm64: installing ${missing[*]} would remove:" >&2
      echo "$removed" >&2
      echo "cross-arm64: not installing; install the arm64 packages by hand or build elsewhere" >&2
      exit 1
    fi
    echo "cross-arm64: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
      --no-install-recommends "${missing[@]}"
  fi
fi

# The tests start programs of the build themselves (the CLI through popen and
# execl, the examples): the kernel must hand arm64 ELF files to qemu. Debian
# registers qemu-user-static with binfmt_misc through systemd at boot; in a
# container without it, register it here (F: the emulator is opened now, so
# it works in any mount namespace). The arm64 loader and libc are those of
# libc6:arm64 (/lib/ld-linux-aarch64.so.1).
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/qemu-aarch64" ]; then
  if [ ! -e "$binfmt/register" ]; then
    $SUDO mount -t binfmt_misc binfmt_misc "$binfmt"
  fi
  magic='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
  mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
  echo ":qemu-aarch64:M::$magic:$mask:/usr/bin/qemu-aarch64-static:F" |
    $SUDO tee "$binfmt/register" >/dev/null
  echo "cross-arm64: registered /usr/bin/qemu-aarch64-static for arm64 programs (binfmt_misc)"
fi

cmake -S . -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DNNT_WERROR=ON -DNNT_VULKAN=OFF "$@" >/dev/null
cmake --build "$dir" -j"$jobs"
if command -v file >/dev/null; then file "$dir/nntrainer"; fi

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# The emulated CPU is a Neoverse N1, a core OpenBLAS has NEON kernels for
# (qemu's default "max" CPU is unknown to it: the generic ARMV8 ones). A
# core type set for the host (OPENBLAS_CORETYPE=Haswell) means nothing to
# the arm64 OpenBLAS: it chooses by the emulated CPU.
export QEMU_CPU=${QEMU_CPU:-neoverse-n1}
unset OPENBLAS_CORETYPE
start=$(date +%s)
rc=0
(cd "$dir" && ctest --output-on-failure -j"$jobs") || rc=$?
end=$(date +%s)
echo "cross-arm64: ctest under qemu-aarch64-static ($QEMU_CPU) took $((end - start)) s, $jobs at a time (exit $rc)"
exit $rc
