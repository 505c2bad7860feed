#!/usr/bin/env bash
# ThreadSanitizer run of the tests where threads share devices, caches and
# plans. Debian's Abseil is not built for ThreadSanitizer, and its mutexes
# are what tessel's threads synchronize through, so this builds Debian's
# own Abseil source package (apt-get source; a deb-src entry for bookworm
# main is added if there is none) instrumented into build-tsan/abseil, then
# tessel and its runtime tests with -fsanitize=thread against it in
# build-tsan/tessel (LLVM stays uninstrumented), and runs the concurrency
# tests (scripts/tsan.supp silences only Abseil's own internals). Run it as
# root on Debian 12 before landing work on the runtime's locking; it takes
# about 15 minutes on 2 cores the first time.
#
#   bash scripts/tsan.sh [CTEST_REGEX]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
root=$repo/build-tsan
tests=${1:-Autotune|Concurrency|Concurrent|ThreadsCompiling|PointersSurviveGrowthAndThreads|LaunchesRacing|KernelsPublishAndWait}

if ! grep -rqs "deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  cat > /etc/apt/sources.list.d/tessel-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt-get update -q
fi
[[ "$(dpkg-query -W -f='${db:Status-Abbrev}' dpkg-dev 2>/dev/null)" == ii* ]] ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends dpkg-dev
bash scripts/tessel.sh setup

flags="-fsanitize=thread -fno-omit-frame-pointer -g1 -O1"
mkdir -p "$root/src"
if [[ ! -d $root/abseil ]]; then
  (cd "$root/src" && apt-get source abseil)
  src=$(find "$root/src" -maxdepth 1 -type d -name 'abseil-*' | head -1)
  cmake -S "$src" -B "$root/abseil-build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_CXX_STANDARD=17 -DABSL_PROPAGATE_CXX_STD=ON -DBUILD_SHARED_LIBS=ON -DABSL_BUILD_TESTING=OFF \
    -DCMAKE_INSTALL_PREFIX="$root/abseil"
  cmake --build "$root/abseil-build" -j "$(nproc)"
  cmake --install "$root/abseil-build" > /dev/null
fi
cmake -S . -B "$root/tessel" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_PREFIX_PATH="$root/abseil" \
  -DTESSEL_BUILD_BENCHMARKS=OFF "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" \
  "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build "$root/tessel" -j "$(nproc)" --target runtime_tests
cd "$root/tessel"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$repo/scripts/tsan.supp" \
  LD_LIBRARY_PATH="$root/abseil/lib" \
  ctest -R "$tests" --output-on-failure
