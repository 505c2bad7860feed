#!/usr/bin/env bash
# Usage: install_tree.sh BUILD_DIR PREFIX
# Installs BUILD_DIR into PREFIX (afresh) with the rules cpack archives, and
# checks that the installed programs and libraries load tessel, Abseil and
# Google Benchmark from the tree itself: a machine without them installed
# relies on it. The consumer checks then build against PREFIX.
set -euo pipefail
build=$1 prefix=$2
cmake=${CMAKE_COMMAND:-cmake}

rm -rf "$prefix"
mkdir -p "$prefix"
log=$prefix.install.log
"$cmake" --install "$build" --prefix "$prefix" > "$log" || {
  cat "$log"; echo "FAIL: cmake --install"; exit 1; }
echo "installed into $prefix: $(grep -c '^-- Install' "$log") files"

outside=$(for f in "$prefix"/bin/* "$prefix"/lib/lib*.so*; do
            [[ -L $f ]] || ldd "$f" 2>/dev/null || true
          done | awk -v p="$prefix/" '$1 ~ /^lib(absl_|benchmark|tessel)/ && index($3, p) != 1 { print "  " $1 " => " $3 }' | sort -u)
if [[ -n "$outside" ]]; then
  echo "FAIL: the installed tree loads these from outside $prefix:"
  echo "$outside"
  exit 1
fi
echo "OK: the installed tree loads tessel, Abseil and Google Benchmark from $prefix/lib"
