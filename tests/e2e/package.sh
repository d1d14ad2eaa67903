#!/usr/bin/env bash
# The Debian package (scripts/package's CPack DEB), made from this build: its control fields,
# installable on this system (dpkg --dry-run: dependencies met), installed with dpkg into a
# root of its own (this system's packages untouched), and its accel run from there.
#   package.sh BUILD_DIR
source "$(dirname "$0")/lib.sh"
BUILD=$1
[[ $(id -u) == 0 ]] || { echo "SKIPPED: dpkg needs root"; exit 77; }
cpack --config "$BUILD/CPackConfig.cmake" -B "$SCRATCH/pkg" >"$SCRATCH/cpack.log" 2>&1 || fail "cpack failed: $(tail "$SCRATCH/cpack.log")"
deb=$(ls "$SCRATCH"/pkg/accel_*.deb) || fail "no package made: $(ls "$SCRATCH/pkg")"
[[ $(dpkg-deb -f "$deb" Package) == accel ]] || fail "package name: $(dpkg-deb -f "$deb" Package)"
expect_contains "$(dpkg-deb -f "$deb" Depends)" "libc6"
expect_contains "$(dpkg-deb -c "$deb")" "./usr/bin/accel"
expect_contains "$(dpkg-deb -c "$deb")" "./usr/lib/cmake/accel/accelConfig.cmake"
# Lean: what it ships is stripped (CPACK_STRIP_FILES, and the archives' debug info on install),
# whatever this build's type; at most 10 MB (a RelWithDebInfo build's package was 40 MB).
size=$(stat -c %s "$deb")
((size <= 10 * 1000 * 1000)) || fail "the package is $size bytes, over 10 MB"
expect_exit 0 dpkg --dry-run -i "$deb"
root=$SCRATCH/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
# Its dependencies are this system's (checked above), not this empty root's.
expect_exit 0 dpkg --root="$root" --force-depends --force-not-root --force-script-chrootless -i "$deb"
expect_contains "$(dpkg --root="$root" -s accel)" "Status: install ok installed"
for f in "$root/usr/bin/accel" "$root"/usr/lib/libaccel*.a; do
  sections=$(readelf -SW "$f") || fail "readelf $f"
  [[ "$sections" != *.debug_info* ]] || fail "$f ships debug info"
done
[[ $(readelf -SW "$root/usr/bin/accel") != *" .symtab "* ]] || fail "accel ships its symbol table"
expect_exit 0 "$root/usr/bin/accel" --version
expect_contains "$OUT" "$(dpkg-deb -f "$deb" Version)"
expect_exit 0 "$root/usr/bin/accel" launch -n 2 /bin/echo installed
expect_contains "$OUT" "[rank 1] installed"
echo "ok: package"
