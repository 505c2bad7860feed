#!/usr/bin/env bash
# Usage: check_find_package.sh [--hide-system-abseil] ROOT TESSEL_DIR ABSEIL_DIR CONSUMER_SOURCE_DIR SCRATCH_DIR [CMAKE_ARGS...]
# Configures the consumer project with -DCMAKE_PREFIX_PATH=ROOT (an installed
# tree or a build tree), builds it and runs it. Fails unless find_package(tessel)
# took TESSEL_DIR, every Abseil header compiled came from ABSEIL_DIR/absl/,
# and the program loads libtessel (and, where ABSEIL_DIR lies in ROOT, Abseil)
# from ROOT. --hide-system-abseil does all that where the system Abseil's
# headers and CMake package are hidden (common.sh).
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
source "$here/common.sh"
if [[ ${1:-} == --hide-system-abseil ]]; then
  shift
  hide_system_abseil "${BASH_SOURCE[0]}" --hide-system-abseil "$@"
fi
root=$1 tessel_dir=$2 absl_dir=$3 consumer=$4 scratch=$5
shift 5
cmake=${CMAKE_COMMAND:-cmake}

rm -rf "$scratch"
mkdir -p "$scratch"
args=(-S "$consumer" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$root" "$@")
[[ -n "${TESSEL_GENERATOR:-}" ]] && args+=(-G "$TESSEL_GENERATOR")
[[ -n "${TESSEL_MAKE_PROGRAM:-}" ]] && args+=(-DCMAKE_MAKE_PROGRAM="$TESSEL_MAKE_PROGRAM")
[[ -n "${CXX:-}" ]] && args+=(-DCMAKE_CXX_COMPILER="$CXX")
[[ -n "${TESSEL_CCACHE:-}" ]] && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$TESSEL_CCACHE")
"$cmake" "${args[@]}"
"$cmake" --build "$scratch/build"

found=$(sed -n 's/^tessel_DIR:PATH=//p' "$scratch/build/CMakeCache.txt")
if [[ "$(realpath -m "$found")" != "$(realpath -m "$tessel_dir")" ]]; then
  echo "FAIL: the consumer found tessel in '$found', not in $tessel_dir"
  exit 1
fi
included_headers "$scratch/build" CMakeFiles/consumer.dir/main.cc.o | check_abseil_from "$absl_dir"
program=$scratch/build/consumer
check_loads_from "$program" '^libtessel[.]so' "$root"
if [[ $(realpath -m "$absl_dir") == "$(realpath -m "$root")"/* ]]; then
  check_loads_from "$program" '^libabsl_' "$root"
fi
TESSEL_CACHE_DIR=$scratch/cache "$program"
