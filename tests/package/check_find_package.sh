#!/usr/bin/env bash
# Usage: check_find_package.sh BUILD_DIR CONSUMER_SOURCE_DIR SCRATCH_DIR
# Installs BUILD_DIR into SCRATCH_DIR/prefix, builds the consumer project
# against it with find_package(tessel CONFIG) and runs it.
set -euo pipefail
build=$1 consumer=$2 scratch=$3
cmake=${CMAKE_COMMAND:-cmake}
prefix=$scratch/prefix

rm -rf "$scratch"
mkdir -p "$scratch"
"$cmake" --install "$build" --prefix "$prefix" > "$scratch/install.log" || {
  cat "$scratch/install.log"; echo "FAIL: cmake --install"; exit 1; }
echo "installed into $prefix: $(grep -c '^-- Install' "$scratch/install.log") files"

# The installed programs and libraries must load tessel, Abseil and Google
# Benchmark from the tree itself (a machine without them installed relies on it).
outside=$(for f in "$prefix"/bin/* "$prefix"/lib/lib*.so*; do
            [[ -L $f ]] || ldd "$f" 2>/dev/null || true
          done | awk -v p="$prefix/" '$1 ~ /^lib(absl_|benchmark|tessel)/ && index($3, p) != 1 { print "  " $1 " => " $3 }' | sort -u)
if [[ -n "$outside" ]]; then
  echo "FAIL: the installed tree loads these from outside $prefix:"
  echo "$outside"
  exit 1
fi

args=(-S "$consumer" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix")
[[ -n "${TESSEL_GENERATOR:-}" ]] && args+=(-G "$TESSEL_GENERATOR")
[[ -n "${CXX:-}" ]] && args+=(-DCMAKE_CXX_COMPILER="$CXX")
[[ -n "${TESSEL_CCACHE:-}" ]] && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$TESSEL_CCACHE")
"$cmake" "${args[@]}"
"$cmake" --build "$scratch/build"

# The consumer must have used the installed tree, not the build tree.
found=$(sed -n 's/^tessel_DIR:PATH=//p' "$scratch/build/CMakeCache.txt")
if [[ "$found" != "$prefix/lib/cmake/tessel" ]]; then
  echo "FAIL: the consumer found tessel in '$found', not in $prefix/lib/cmake/tessel"
  exit 1
fi
loaded=$(ldd "$scratch/build/consumer" | awk '$1 ~ /^libtessel\.so/ { print $3 }')
if [[ "$loaded" != "$prefix/lib/"* ]]; then
  echo "FAIL: the consumer loads libtessel from '$loaded', not from $prefix/lib"
  exit 1
fi
"$scratch/build/consumer"
