# shellcheck shell=bash
# Helpers for the consumer checks; sourced.

# hide_system_abseil SCRIPT ARGS...: re-runs SCRIPT with ARGS (once) in a
# private mount namespace where the folders in $TESSEL_SYSTEM_ABSEIL
# (colon-separated: the system Abseil's headers and CMake package) are empty,
# as on a machine without libabsl-dev. Exits 77, which the tests report as
# skipped, where no mount namespace can be made.
hide_system_abseil() {
  local script=$1
  shift
  [[ -n ${TESSEL_ABSEIL_HIDDEN:-} ]] && return 0
  local unshare=(unshare --mount --propagation private)
  if ! "${unshare[@]}" true 2>/dev/null; then
    unshare+=(--map-root-user)  # without root, through a user namespace
    if ! "${unshare[@]}" true 2>/dev/null; then
      echo "SKIP: cannot hide the system Abseil: unshare --mount is not permitted here"
      exit 77
    fi
  fi
  # shellcheck disable=SC2016
  exec "${unshare[@]}" bash -c '
    set -e
    IFS=: read -ra dirs <<< "$TESSEL_SYSTEM_ABSEIL"
    for dir in "${dirs[@]}"; do
      if [[ -d $dir ]]; then
        mount -t tmpfs -o ro tessel-no-abseil "$dir"
        echo "hidden: $dir"
      fi
    done
    TESSEL_ABSEIL_HIDDEN=1 exec bash "$@"' hide "$script" "$@"
}

# included_headers BUILD_DIR OBJECT [DEPFILE]: the files the compiler read to
# make OBJECT, one absolute path a line, from Ninja's log (which names files
# relative to BUILD_DIR) or else from the compiler's depfile.
included_headers() {
  local build=$1 object=$2 depfile=${3:-$1/$2.d}
  (
    cd "$build" || exit 1
    if [[ -f build.ninja ]]; then
      "${TESSEL_MAKE_PROGRAM:-ninja}" -t deps "$object" | tail -n +2
    else
      sed 's/\\$//' "$depfile" | tr ' ' '\n'
    fi | sed 's/^[[:space:]]*//' | grep -v -e '^$' -e ':$' | xargs -r realpath -m
  )
}

# check_abseil_from DIR: reads the included files (included_headers) on stdin
# and fails unless every Abseil header among them, and at least one, lies
# under DIR/absl/.
check_abseil_from() {
  local want
  want=$(realpath -m "$1")
  local absl
  absl=$(grep -E '/absl/.*\.(h|inc)$' | sort -u)
  if [[ -z $absl ]]; then
    echo "FAIL: the consumer compiled no Abseil header at all (is the check looking at the right object?)"
    return 1
  fi
  local elsewhere
  elsewhere=$(grep -v "^$want/absl/" <<< "$absl" || true)
  if [[ -n $elsewhere ]]; then
    echo "FAIL: the consumer compiled Abseil headers from outside $want/absl:"
    sed 's/^/  /' <<< "$elsewhere" | head -20
    return 1
  fi
  echo "OK: all $(wc -l <<< "$absl") Abseil headers the consumer compiled came from $want/absl"
}

# check_loads_from PROGRAM PATTERN DIR: fails unless every library PROGRAM
# loads whose name matches PATTERN (an awk regex) comes from under DIR.
check_loads_from() {
  local program=$1 pattern=$2 dir
  dir=$(realpath -m "$3")
  local name arrow path found=0 elsewhere=""
  while read -r name arrow path _; do
    found=1
    [[ $(realpath -m "$path") == "$dir"/* ]] || elsewhere+="$name $arrow $path"$'\n'
  done < <(ldd "$program" | awk -v re="$pattern" '$1 ~ re')
  if (( !found )); then
    echo "FAIL: $program loads no library matching $pattern"
    return 1
  fi
  if [[ -n $elsewhere ]]; then
    echo "FAIL: $program loads these from outside $dir:"
    printf '%s' "$elsewhere" | sed 's/^/  /'
    return 1
  fi
}
