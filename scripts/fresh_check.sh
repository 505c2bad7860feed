#!/usr/bin/env bash
# fresh_check.sh — run the README's two commands on a fresh Debian 12 root.
#
#   bash scripts/fresh_check.sh [ROOT]        (as root; ROOT defaults to /tmp/tessel-fresh-root)
#
# Builds a minimal Debian 12 (bookworm) root with debootstrap, from the first
# bookworm mirror this machine's apt sources name, clones this repository's
# HEAD into it, and inside it (chroot, no NVIDIA software, nothing installed
# but what debootstrap brings) runs exactly
#   bash scripts/tessel.sh sample
#   bash scripts/tessel.sh test
# as the README writes them, reporting the time and exit code of each. Run it
# whenever dependencies or set-up change; docs/benchmarks.md records the last
# result. Takes about an hour on 2 cores (the build is cold: no ccache).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

root=${1:-/tmp/tessel-fresh-root}
if (( EUID != 0 )); then
  echo "error: fresh_check.sh needs root (debootstrap and chroot)" >&2
  exit 1
fi
for tool in debootstrap chroot git; do
  if ! command -v "$tool" > /dev/null; then
    echo "error: fresh_check.sh needs $tool (apt-get install debootstrap git)" >&2
    exit 1
  fi
done

# The mirror this machine already uses for bookworm, from deb822 or one-line sources.
mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk '/^URIs:/ {uri=$2} /^Suites:/ && / bookworm( |$)/ {print uri; exit}' "$f"
  done
  if [[ -f /etc/apt/sources.list ]]; then
    awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list
  fi
}
url=$(mirror | head -n 1)
if [[ -z $url ]]; then
  echo "error: no bookworm mirror in /etc/apt/sources.list(.d) to build the root from" >&2
  exit 1
fi

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2> /dev/null || true; done
}
trap cleanup EXIT

if [[ -e $root ]]; then
  echo "error: $root exists; remove it first (rm -rf $root) so the root is fresh" >&2
  exit 1
fi
echo "== debootstrap bookworm into $root"
start=$SECONDS
debootstrap --variant=minbase bookworm "$root" "$url" > "$root.debootstrap.log" 2>&1 || {
  tail -n 20 "$root.debootstrap.log" >&2
  exit 1
}
echo "   $((SECONDS - start)) s"

for fs in proc sys dev dev/pts; do
  mkdir -p "$root/$fs"
  mount --bind "/$fs" "$root/$fs"
  mounted+=("$root/$fs")
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
git clone --quiet --no-local "$PWD" "$root/root/tessel"

status=0
report=()
for command in sample test; do
  echo "== bash scripts/tessel.sh $command (in the fresh root)"
  start=$SECONDS
  rc=0
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    bash -c "cd /root/tessel && bash scripts/tessel.sh $command" > "$root.$command.log" 2>&1 || rc=$?
  tail -n 5 "$root.$command.log"
  report+=("$(printf '%-8s exit %-3d %6d s   log: %s' "$command" "$rc" $((SECONDS - start)) "$root.$command.log")")
  (( rc == 0 )) || status=1
done
echo "== fresh Debian 12 root, commit $(git rev-parse --short HEAD)"
printf '%s\n' "${report[@]}"
exit $status
