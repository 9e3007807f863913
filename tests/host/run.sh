#!/bin/bash
# `make test-host`: Warden's .deb on a stock Debian 12 host - systemd as
# PID 1, cgroup v2, Debian's kernel, AppArmor - in a real VM booted with
# qemu's TCG (software emulation: this machine's KVM takes only PVM guests).
# Builds the package (scripts/make_deb.sh), builds or reuses the image
# (tests/host/image.sh, cached under BUILD_DIR/host-image/ by the package
# list and that script), boots it from its own kernel and initrd with
# `-snapshot` (the image is never written), shares the package and the
# source and build trees read-only over 9p, and lets the image's
# warden-host-test.service run tests/host/guest.sh and power off. Prints the
# guest's log (and keeps its logs in BUILD_DIR/host-test-logs/); exits 0 only
# if every check in it passed. A killed run leaves nothing: qemu is stopped
# and the run directory (with qemu's temporary overlay) removed.
#
#   tests/host/run.sh BUILD_DIR          HOST_TEST_TIMEOUT=seconds (default 1800)
#   tests/host/run.sh --image-only BUILD_DIR
#                                        builds (or finds) the image and stops:
#                                        .ci/run has it made, download-bound,
#                                        while make test's suite runs
#
# The VM gets HOST_TEST_TIMEOUT to finish: 1800 s, about 2.7 times the 660-675 s
# it took on this 2-core machine at load 7-8, so that a hung guest costs CI
# (.ci/run) half an hour at most, not its whole budget.
set -uo pipefail

image_only=false
if [ "${1:-}" = --image-only ]; then image_only=true; shift; fi
build_dir=$(realpath "${1:?usage: run.sh [--image-only] BUILD_DIR}")
source_dir=$(realpath "$(dirname "$0")/../..")
timeout_s=${HOST_TEST_TIMEOUT:-1800}
began=$SECONDS

deb=$("$source_dir/scripts/make_deb.sh" "$build_dir" "$build_dir/deb") || { echo "FAIL: make_deb.sh" >&2; exit 1; }
# The .deb's Depends, one package each (the first of any alternatives).
depends=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -E 's/\|.*//; s/\(.*\)//; s/ //g' | grep . | sort -u)
key=$( (printf '%s\n' $depends; cat "$source_dir/tests/host/image.sh") | sha256sum | cut -c1-16)
images=$build_dir/host-image
image=$images/$key
if [ ! -f "$image/disk.img" ]; then
  echo "building the image $image ($(wc -w <<<"$depends") packages the .deb depends on, and a stock base)"
  mkdir -p "$images"
  # Images for other package lists are stale: one is kept.
  find "$images" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
  t=$SECONDS
  "$source_dir/tests/host/image.sh" "$image" $depends || { echo "FAIL: building the image" >&2; exit 1; }
  echo "image built in $((SECONDS - t)) s"
else
  echo "reusing the image $image"
fi
$image_only && exit 0

run=$(mktemp -d "$build_dir/host-run.XXXXXX")
qemu_pid=""
cleanup() {
  if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
    kill "$qemu_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$qemu_pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$qemu_pid" 2>/dev/null
    wait "$qemu_pid" 2>/dev/null
  fi
  rm -rf --one-file-system "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

mkdir -p "$run/share/out" "$run/tmp"
cp "$deb" "$run/share/"
# What the guest's unit runs: the read-only trees at the paths they have
# here (the escape tests have them compiled in), then the checks.
mounts="mkdir -p '$source_dir' && mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro src '$source_dir'"
share_build=()
case "$build_dir/" in
  "$source_dir"/*) ;;
  *) mounts="$mounts && mkdir -p '$build_dir' && mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro build '$build_dir'"
     share_build=(-virtfs "local,path=$build_dir,mount_tag=build,security_model=none,readonly=on,id=build") ;;
esac
cat > "$run/share/run" <<SCRIPT
#!/bin/sh
$mounts || exit 2
exec /bin/bash '$source_dir/tests/host/guest.sh' '/mnt/host/$(basename "$deb")' '$source_dir' '$build_dir'
SCRIPT
chmod 755 "$run/share/run"

echo "booting a stock Debian 12 VM (qemu TCG, 2 vCPUs; console: $run/console.log)"
t=$SECONDS
# TMPDIR: qemu's -snapshot overlay goes in the run directory, which the
# trap removes even if qemu is killed.
TMPDIR=$run/tmp timeout --kill-after=30 "$timeout_s" qemu-system-x86_64 \
  -accel tcg,thread=multi -cpu max -smp 2 -m 3072 -machine q35 -no-reboot -snapshot \
  -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
  -append "root=/dev/vda rw console=ttyS0 panic=-1 quiet" \
  -drive "file=$image/disk.img,format=raw,if=virtio,cache=unsafe" \
  -virtfs "local,path=$run/share,mount_tag=hostshare,security_model=none,id=hostshare" \
  -virtfs "local,path=$source_dir,mount_tag=src,security_model=none,readonly=on,id=src" \
  "${share_build[@]}" \
  -nic none -serial "file:$run/console.log" -monitor none -display none &
qemu_pid=$!
wait "$qemu_pid"
qemu_rc=$?
qemu_pid=""
echo "the VM ran for $((SECONDS - t)) s (qemu exit status $qemu_rc); $((SECONDS - began)) s in all"

# The guest's logs (its checks, --check, the escape tests, wardend's journal)
# and the console stay for reading after the run.
rm -rf "$build_dir/host-test-logs"
cp -r "$run/share/out" "$build_dir/host-test-logs"
cp "$run/console.log" "$build_dir/host-test-logs/" 2>/dev/null
if [ -f "$run/share/out/guest.log" ]; then
  cat "$run/share/out/guest.log"
else
  echo "FAIL: the guest wrote no log; its console:" >&2
  tail -50 "$run/console.log" >&2
fi
rc=$(cat "$run/share/out/rc" 2>/dev/null)
if [ "$rc" = 0 ] && grep -q '^ALL HOST CHECKS PASSED$' "$run/share/out/guest.log"; then
  echo "make test-host: passed"
  exit 0
fi
[ "$qemu_rc" = 124 ] && echo "FAIL: the VM did not finish within ${timeout_s} s" >&2
echo "make test-host: FAILED" >&2
tail -30 "$run/console.log" >&2
echo "the guest's logs: $build_dir/host-test-logs/" >&2
exit 1
