#!/usr/bin/env bash
# Usage: check_pkg_config.sh [--hide-system-abseil] PREFIX CONSUMER_SOURCE_DIR SCRATCH_DIR
# Builds the consumer without CMake, with the compiler line README.md gives:
#   $CXX -std=c++20 main.cc $(pkg-config --cflags --libs PREFIX/lib/pkgconfig/tessel.pc)
# then runs it. Fails unless every Abseil header compiled came from the tree
# and the program loads libtessel and Abseil from it.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
source "$here/common.sh"
if [[ ${1:-} == --hide-system-abseil ]]; then
  shift
  hide_system_abseil "${BASH_SOURCE[0]}" --hide-system-abseil "$@"
fi
prefix=$1 consumer=$2 scratch=$3
pkg_config=${PKG_CONFIG:-pkg-config}
if ! command -v "$pkg_config" > /dev/null; then
  echo "SKIP: no $pkg_config here (apt-get install pkg-config)"
  exit 77
fi

rm -rf "$scratch"
mkdir -p "$scratch"
flags=$("$pkg_config" --cflags --libs "$prefix/lib/pkgconfig/tessel.pc")
echo "pkg-config: $flags"
read -ra compile <<< "${TESSEL_CCACHE:-} ${CXX:-c++}"
# shellcheck disable=SC2086  # the flags are words, as on a command line
"${compile[@]}" -std=c++20 -O1 "$consumer/main.cc" $flags -MD -MF "$scratch/main.d" -o "$scratch/consumer"

included_headers "$scratch" main.o "$scratch/main.d" | check_abseil_from "$prefix/include/tessel/third_party"
check_loads_from "$scratch/consumer" '^lib(tessel|absl_)' "$prefix"
TESSEL_CACHE_DIR=$scratch/cache "$scratch/consumer"
