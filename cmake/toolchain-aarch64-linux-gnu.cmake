# CMake toolchain file for an arm64 (aarch64) cross build on a Debian amd64
# host (docs/cross-arm64.md, scripts/cross-arm64.sh): Debian's cross gcc of
# crossbuild-essential-arm64, the arm64 libraries of the multiarch packages
# (libopenblas-dev:arm64 ...), and qemu-user-static to run what was built
# (ctest runs every test program through CMAKE_CROSSCOMPILING_EMULATOR).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(NNT_CROSS_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${NNT_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${NNT_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${NNT_CROSS_TRIPLE})

# Headers and libraries from the target's places only; programs (glslc,
# pkg-config) from the host's.
set(CMAKE_FIND_ROOT_PATH /usr/${NNT_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config reads the arm64 .pc files, never the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${NNT_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# The programs run with the arm64 loader and libc of libc6:arm64
# (/lib/ld-linux-aarch64.so.1, pulled in by the -dev packages above), the
# ones the arm64 libraries were built against. No -L /usr/aarch64-linux-gnu:
# that takes the loader of libc6-arm64-cross (the compiler's copy, another
# build) with the multiarch libc.so.6, and under that pair the tests hung
# in compute loops (test_alloc_sweep: over 900 s instead of about 40 s).
find_program(NNT_QEMU_AARCH64 qemu-aarch64-static REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${NNT_QEMU_AARCH64})
# Emulated, a test runs tens to hundreds of times slower than natively
# (test_applications: 1285 s against 6.5 s, docs/cross-arm64.md).
set(NNT_TEST_TIMEOUT 7200)
