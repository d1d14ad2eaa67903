#!/usr/bin/env bash
# Re-records tests/fixtures/accelerate/ from accelerate's own code at both tags:
#   scripts/accelerate_fixtures/record_all.sh [ACCELERATE_SRC_ROOT]   (default /work/accelerate-src)
# v0.27.2 runs under Debian 12's /usr/bin/python3 (torch 1.13), v1.14.0 under torch 2.6 in
# scripts/torch2_chroot.sh's chroot. Both run in a fresh network namespace (unshare -n, loopback
# up) so that accelerate's is_port_in_use(29500) probe sees no other process's listener and the
# recording does not depend on what else runs on this machine. Needs root (chroot, unshare).
# Each tag is recorded into a temporary directory and swapped in whole, so an interrupted run
# leaves the committed fixtures as they were.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
src_root=${1:-/work/accelerate-src}
out_root=$repo/tests/fixtures/accelerate
((EUID == 0)) || { echo "record_all: needs root (unshare -n, chroot)" >&2; exit 1; }
"$repo/scripts/torch2_chroot.sh" check

record_tag() {  # tag, then the command that runs python3 for it
  local tag=$1; shift
  local new=$out_root/.new-$tag
  rm -rf "$new"; mkdir -p "$new"
  unshare -n -- sh -c 'ip link set lo up && exec "$@"' sh "$@" "$here/record.py" keys \
    --accelerate-src "$src_root/$tag" --out "$new/config_keys.json"
  unshare -n -- sh -c 'ip link set lo up && exec "$@"' sh "$@" "$here/record.py" \
    --accelerate-src "$src_root/$tag" --out "$new" "$here/cases.json"
  [[ ! -d "$out_root/$tag" ]] || mv "$out_root/$tag" "$out_root/.old-$tag"
  mv "$new" "$out_root/$tag"
  rm -rf "$out_root/.old-$tag"
}

cd "$repo"
start=$SECONDS
record_tag v0.27.2 /usr/bin/python3
export ACCEL_CHROOT_BINDS="$src_root${ACCEL_CHROOT_BINDS:+:$ACCEL_CHROOT_BINDS}"
record_tag v1.14.0 "$repo/scripts/torch2_chroot.sh" run python3
echo "record_all: $(ls "$out_root"/v0.27.2/*.json | wc -l) + $(ls "$out_root"/v1.14.0/*.json | wc -l) files in $((SECONDS - start)) s"
