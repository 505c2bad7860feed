#!/usr/bin/env bash
# Usage: check_symbols.sh path/to/libtessel.so
# Fails, listing the offenders, if the library exports any symbol that is not
# tessel's (LLVM linked inside must stay hidden, see cmake/libtessel.map) or
# needs LLVM, lld or a GPU driver library at load time.
set -euo pipefail
lib=$1
NM=${NM:-nm}
OBJDUMP=${OBJDUMP:-objdump}
CXXFILT=${CXXFILT:-c++filt}
status=0

# 1. Exported symbols. Mangled names of entities in namespace tessel start
#    with _ZN6tessel (_ZNK6tessel for const members, _ZZN6tessel for local
#    statics), after a special-name prefix for vtables, typeinfo, thunks and
#    guard variables. Judging the mangled name is exact where the demangled
#    one is not (std::vector<tessel::Value> mentions tessel:: too).
tessel_re='^_Z(TV|TI|TS|TT|TC|GV|GR|Th[n]?[0-9]+_|Tv[n]?[0-9]+_[n]?[0-9]+_)?Z?N[rVKRO]*6tessel'
mangled=$("$NM" -D --defined-only "$lib" | awk '{ print $NF }' | sed 's/@.*//' | sort -u)
total=$(printf '%s\n' "$mangled" | grep -c . || true)
bad=$(printf '%s\n' "$mangled" | grep -Ev "$tessel_re" | grep -Ev '^(_init|_fini|)$' || true)
# Whatever the mangling, nothing that demangles to LLVM or lld.
llvm=$(printf '%s\n' "$mangled" | "$CXXFILT" | grep -E 'llvm::|LLVM|lld::' || true)
if [[ -n "$bad" ]]; then
  echo "FAIL: $lib exports $(printf '%s\n' "$bad" | wc -l) symbol(s) outside namespace tessel:"
  printf '%s\n' "$bad" | "$CXXFILT" | sed 's/^/  /' | head -200
  status=1
fi
if [[ -n "$llvm" ]]; then
  echo "FAIL: $lib exports LLVM/lld symbols:"
  printf '%s\n' "$llvm" | sed 's/^/  /' | head -200
  status=1
fi
if (( total == 0 )); then
  echo "FAIL: $lib exports no symbols at all (is the version script too strict?)"
  status=1
fi

# 2. Load-time dependencies: LLVM and lld are linked statically, GPU drivers
#    are dlopen()ed at run time.
needed=$("$OBJDUMP" -p "$lib" | awk '$1 == "NEEDED" { print $2 }')
bad_needed=$(printf '%s\n' "$needed" | grep -E '^lib(LLVM|lld|clang|cuda|cudart|nvrtc|amdhip64|hsa-runtime64)' || true)
if [[ -n "$bad_needed" ]]; then
  echo "FAIL: $lib needs libraries that must be linked statically or loaded at run time:"
  printf '%s\n' "$bad_needed" | sed 's/^/  /'
  status=1
fi

if (( status == 0 )); then
  echo "OK: $lib exports $total symbols, all in namespace tessel; NEEDED: $(echo $needed)"
fi
exit $status
