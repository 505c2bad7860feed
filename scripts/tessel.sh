#!/usr/bin/env bash
# tessel.sh — set up a Debian 12 machine, build tessel, and run it.
#
#   bash scripts/tessel.sh sample [ARGS...]   build the main sample (build/samples/matmul) and what it
#                                             needs, then run it on the best device present (the host
#                                             CPU without a GPU)
#   bash scripts/tessel.sh test [ARGS...]     build, then run the test suite through ctest
#   bash scripts/tessel.sh package            build, then make dist/tessel-<version>-Linux-x86_64.tar.xz
#   bash scripts/tessel.sh sanitize [ARGS...] build with AddressSanitizer and UndefinedBehaviorSanitizer
#                                             in build-sanitize/, then run the test suite there
#   bash scripts/tessel.sh setup              only install the Debian packages the build needs
#
# As root, missing Debian packages are installed with apt-get; as another
# user, the script prints the apt-get line to run and stops. The build lives
# in build/ (Release) and is reused by later runs. ARGS go to the sample or ctest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
}
(( $# >= 1 )) || usage
command=$1
shift
case $command in
  sample | test | package | sanitize | setup) ;;
  *) usage ;;
esac

# Everything the build and its tests need (libopenmpi-dev: the MPI test;
# libhsakmt-dev and libamdhip64-dev: the headers tessel's KFD and HIP
# declarations are checked against), from Debian 12 (bookworm) main.
packages=(cmake g++ ninja-build llvm-19-dev lld-19 liblld-19-dev libzstd-dev zlib1g-dev libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
          libhsakmt-dev libamdhip64-dev libopenmpi-dev
          ccache xz-utils binutils patchelf)

missing_packages() {
  local p
  for p in "${packages[@]}"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null)" != ii* ]]; then
      echo "$p"
    fi
  done
}

install_packages() {
  local missing
  mapfile -t missing < <(missing_packages)
  (( ${#missing[@]} == 0 )) && return 0
  if (( EUID != 0 )); then
    echo "tessel needs these Debian packages: ${missing[*]}" >&2
    echo "Install them as root, then run this again:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  echo "== installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  # LLVM 19 (llvm-toolchain-19, 1:19.1.7-3~deb12u1) came to bookworm in a
  # point release; older mirrors and snapshots do not have it.
  local p unavailable=()
  for p in "${missing[@]}"; do
    if [[ "$(apt-cache policy "$p" 2>/dev/null)" != *"Candidate: "[^\(]* ]]; then
      unavailable+=("$p")
    fi
  done
  if (( ${#unavailable[@]} > 0 )); then
    echo "error: apt has no candidate for: ${unavailable[*]}" >&2
    if [[ " ${unavailable[*]} " == *" llvm-19-dev "* ]]; then
      echo "LLVM 19 is in Debian 12's main archive from a later bookworm point release on" >&2
      echo "(llvm-19-dev 1:19.1.7-3~deb12u1). Point /etc/apt/sources.list(.d) at a current" >&2
      echo "bookworm mirror (deb.debian.org), or add apt.llvm.org's llvm-toolchain-bookworm-19" >&2
      echo "repository, which provides the same package names." >&2
    fi
    exit 1
  fi
  apt-get install -y --no-install-recommends "${missing[@]}"
}

# build DIR [CMAKE_ARGS...]: configures DIR, then builds $targets (every
# target when empty).
targets=()
build() {
  local dir=$1
  shift
  local args=(-S . -B "$dir" "$@")
  # A fresh build uses Ninja; an existing one keeps its generator.
  [[ -f $dir/CMakeCache.txt ]] || args+=(-G Ninja)
  echo "== configuring $dir/"
  cmake "${args[@]}"
  echo "== building with $(nproc) jobs"
  cmake --build "$dir" -j "$(nproc)" ${targets[@]:+--target "${targets[@]}"}
}

install_packages
[[ $command == setup ]] && exit 0
if [[ $command == sanitize ]]; then
  # LLVM, Abseil and the C++ runtime come uninstrumented from Debian; tessel's
  # own code, tests and samples are checked. No benchmarks: timing means
  # nothing here. GCC 12 warns falsely in instrumented code about LLVM's
  # GlobalVariable new/delete and libstdc++'s <regex>, so those two are off.
  flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  quiet="-Wno-mismatched-new-delete -Wno-maybe-uninitialized"
  build build-sanitize -DCMAKE_BUILD_TYPE=None -DTESSEL_BUILD_BENCHMARKS=OFF \
    "-DCMAKE_CXX_FLAGS=-O1 -g1 $flags $quiet" "-DCMAKE_C_FLAGS=-O1 $flags" \
    "-DCMAKE_EXE_LINKER_FLAGS=$flags" "-DCMAKE_SHARED_LINKER_FLAGS=$flags"
else
  # The sample needs only itself (and libtessel); `test` builds the rest.
  [[ $command == sample ]] && targets=(matmul)
  build build -DCMAKE_BUILD_TYPE=Release
fi

case $command in
  sample)
    if [[ ! -x build/samples/matmul ]]; then
      echo "error: build/samples/matmul was not built (is samples/matmul.cc there yet?)" >&2
      exit 1
    fi
    echo "== build/samples/matmul $*"
    exec build/samples/matmul "$@"
    ;;
  test)
    echo "== ctest"
    exec ctest --test-dir build --output-on-failure -j2 "$@"
    ;;
  sanitize)
    echo "== ctest under AddressSanitizer and UndefinedBehaviorSanitizer"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
    # The package checks look at how the shipped Release library links.
    exec ctest --test-dir build-sanitize --output-on-failure -j2 -LE package "$@"
    ;;
  package)
    echo "== cpack"
    rm -f build/tessel-*.tar.xz build/tessel-*.tar.xz.sha256
    (cd build && cpack -G TXZ)
    mkdir -p dist
    rm -f dist/tessel-*.tar.xz dist/tessel-*.tar.xz.sha256
    mv build/tessel-*.tar.xz build/tessel-*.tar.xz.sha256 dist/
    ls -l dist/
    ;;
esac
