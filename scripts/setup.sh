#!/usr/bin/env bash
# Install what nntrainer needs to build, test and run its examples, from
# Debian's packages only. Idempotent: installs only what is missing.
set -euo pipefail

# clang-14 and libclang-rt-14-dev (libFuzzer and clang's sanitizer
# runtimes) build the fuzz targets of scripts/fuzz.sh (docs/fuzzing.md).
# libvulkan-dev and glslc build the Vulkan backend; mesa-vulkan-drivers
# (lavapipe, a CPU Vulkan device) and vulkan-validationlayers run its tests
# (docs/gpu.md); vulkan-tools has vulkaninfo. fortunes is the English text the
# character-level language model example trains on (Applications/CharLM).
PKGS=(build-essential cmake pkg-config libopenblas-dev libcmocka-dev
      zlib1g-dev dataset-fashion-mnist fortunes clang-14 libclang-rt-14-dev
      libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers vulkan-tools)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
