#!/usr/bin/env bash
# Fuzzes tessel with libFuzzer (clang 19 from Debian, with AddressSanitizer
# and UndefinedBehaviorSanitizer): builds the targets in fuzz/ into
# build-fuzz/, runs each for SECONDS (default 60) from fuzz/corpus/<target>/
# plus what earlier runs found (build-fuzz/corpus/<target>/), and prints
# what each run did. An input that crashed, hung or ran out of memory is
# copied into fuzz/corpus/<target>/, where the replay test keeps it, and the
# script fails. With FUZZ_PLATEAU=P set, a run also stops once its
# coverage has not grown for P seconds (SECONDS stays the upper bound), and
# says whether it got there.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     targets: tensor_map builder
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${1:-60}
plateau=${FUZZ_PLATEAU:-0}
(( $# > 0 )) && shift
targets=("$@")
(( ${#targets[@]} > 0 )) || targets=(tensor_map builder)

packages=(clang-19 libclang-rt-19-dev libabsl-dev pkg-config ccache)
missing=()
for p in "${packages[@]}"; do
  [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null)" == ii* ]] || missing+=("$p")
done
if (( ${#missing[@]} > 0 )); then
  if (( EUID != 0 )); then
    echo "scripts/fuzz.sh needs: ${missing[*]} (apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The sources each target needs: tessel's own, instrumented; Abseil comes
# from Debian.
declare -A sources=(
  [tensor_map]="base/tma_rules.cc dsl/types.cc runtime/tensor_map.cc"
  [builder]="base/tma_rules.cc $(echo dsl/*.cc)"
)
out=build-fuzz
mkdir -p "$out/obj"
cxx=(ccache clang++-19 -std=c++20 -O1 -g -fno-omit-frame-pointer -I. -fsanitize=address,undefined
     -fno-sanitize-recover=undefined)
abseil=$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format absl_synchronization \
                           absl_flat_hash_map absl_hash)
# watch_plateau PID LOG P: while the fuzzer PID runs, notes when the
# coverage in LOG last grew; stops it (SIGINT, so it prints its final
# stats) once that was P seconds ago. Fails if the fuzzer ended first.
watch_plateau() {
  local pid=$1 log=$2 p=$3 cov=-1 grew now c
  grew=$(date +%s)
  while kill -0 "$pid" 2> /dev/null; do
    sleep 10
    c=$(grep -oE "cov: [0-9]+" "$log" | tail -1 | cut -d' ' -f2)
    now=$(date +%s)
    if [[ -n $c ]] && (( c > cov )); then
      cov=$c
      grew=$now
      echo "   $(date -u +%H:%M:%S) coverage $cov edges"
    elif (( now - grew >= p )); then
      echo "   $(date -u +%H:%M:%S) coverage flat at $cov edges for ${p}s: stopping"
      kill -INT "$pid" 2> /dev/null || true
      return 0
    fi
  done
  return 1
}

failed=0
for t in "${targets[@]}"; do
  [[ -n "${sources[$t]:-}" ]] || { echo "unknown fuzz target: $t" >&2; exit 1; }
  objs=()
  for src in ${sources[$t]} fuzz/${t}_fuzz.cc; do
    obj=$out/obj/$(tr / _ <<< "${src%.cc}").o
    "${cxx[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
    objs+=("$obj")
  done
  "${cxx[@]}" -fsanitize=fuzzer "${objs[@]}" $abseil -o "$out/${t}_fuzz"
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t"
  echo "== $t: ${seconds}s"
  log=$out/$t.log
  status=0
  "$out/${t}_fuzz" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/$t/" "$out/corpus/$t" "fuzz/corpus/$t" > "$log" 2>&1 &
  pid=$!
  stopped=0
  if (( plateau > 0 )) && watch_plateau "$pid" "$log" "$plateau"; then
    stopped=1
  fi
  wait "$pid" || status=$?
  (( stopped )) && status=0  # interrupted by us; a crash would have left an artifact
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*(DONE|pulse)" "$log" | tail -3
  grep -oE "cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+" "$log" | tail -1
  for a in "$out/artifacts/$t"/*; do
    [[ -e $a ]] || continue
    cp "$a" "fuzz/corpus/$t/"
    echo "FOUND: $a (kept as fuzz/corpus/$t/$(basename "$a"))"
    failed=1
  done
  if (( status != 0 )); then
    tail -40 "$log"
    failed=1
  fi
done
exit $failed
