#!/usr/bin/env bash
# gpu_run.sh — run a tessel binary package on a GPU machine.
#
# Run from the repository root on the GPU machine (Ubuntu 24.04 with a CUDA
# driver; no LLVM or Abseil needed) after `bash scripts/tessel.sh package`
# made dist/tessel-*.tar.xz here. Unpacks it into /tmp/tessel, then runs every
# test suite (bin/*_tests) and every sample (--device=best),
# each with its output in $OUT/<name>.log (OUT defaults to ./gpu-logs). Never
# stops at a failure; prints a summary table (also $OUT/summary.txt) and exits
# nonzero if anything failed. TESSEL_GPU_TIMEOUT (seconds, default 900) bounds
# each program, so a hang is reported as exit code 124.
set -uo pipefail

OUT=${OUT:-$PWD/gpu-logs}
timeout_s=${TESSEL_GPU_TIMEOUT:-900}
root=/tmp/tessel
mkdir -p "$OUT"

shopt -s nullglob
packages=(dist/tessel-*.tar.xz)
if (( ${#packages[@]} != 1 )); then
  echo "error: expected exactly one dist/tessel-*.tar.xz in $PWD, found ${#packages[@]}" >&2
  exit 1
fi
echo "== unpacking ${packages[0]} into $root"
rm -rf "$root"
mkdir -p "$root"
if command -v xz > /dev/null; then
  tar -xJf "${packages[0]}" -C "$root" --strip-components=1 || exit 1
else  # xz-utils is not on every minimal image; Python's lzma reads it too
  python3 - "${packages[0]}" "$root" <<'PY' || exit 1
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    for m in t.getmembers():
        m.name = m.name.split("/", 1)[1] if "/" in m.name else "."
    t.extractall(sys.argv[2])
PY
fi

echo "== nvidia-smi -L"
nvidia-smi -L || echo "(nvidia-smi failed: no NVIDIA driver here?)"

names=()
codes=()
# run NAME COMMAND...: runs one program, logs it, records its exit code.
run() {
  local name=$1
  shift
  echo "== $name: $*"
  stdbuf -oL -eL timeout --kill-after=30 "$timeout_s" "$@" < /dev/null > "$OUT/$name.log" 2>&1
  local code=$?
  if (( code == 124 || code == 137 )); then
    # A hang: name the test that was running (suites log every test start).
    echo "   timed out after ${timeout_s}s; last test started:"
    grep '^\[ RUN      \]' "$OUT/$name.log" | tail -n 1 | sed 's/^/   /'
  fi
  grep -E '^\[  FAILED  \] .*\(' "$OUT/$name.log" | sed 's/^/   /'
  tail -n 5 "$OUT/$name.log" | sed 's/^/   /'
  names+=("$name")
  codes+=("$code")
}

# Every library of every program must resolve inside the package or the base system.
run ldd bash -c 'out=$(ldd "$0"/lib/libtessel.so.* "$0"/bin/* 2>&1); echo "$out"; ! grep -q "not found" <<< "$out"' "$root"

for test in "$root"/bin/*_tests; do
  [[ -x $test ]] && run "$(basename "$test")" "$test"
done
if [[ -f $root/share/tessel/samples.txt ]]; then
  while read -r sample; do
    [[ -n $sample && -x $root/bin/$sample ]] && run "$sample" "$root/bin/$sample" --device=best
  done < "$root/share/tessel/samples.txt"
fi

failed=0
for code in "${codes[@]}"; do
  (( code != 0 )) && failed=$((failed + 1))
done
{
  printf '%-32s %s\n' name exit
  for i in "${!names[@]}"; do
    printf '%-32s %s\n' "${names[$i]}" "${codes[$i]}"
  done
  echo "$failed of ${#names[@]} failed"
} | tee "$OUT/summary.txt"
(( failed == 0 ))
