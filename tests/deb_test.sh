#!/bin/bash
# The Debian package as an operator meets it: build it (scripts/make_deb.sh),
# install it with apt-get, check the unit with systemd-analyze verify, that
# nothing was started, run the installed `wardend --check` and a one-shot
# through the installed binaries over the group-accessible socket, then purge
# it and check that nothing it created is left.
#
#   tests/deb_test.sh BUILD_DIR
set -uo pipefail

build_dir=$(realpath "${1:?usage: deb_test.sh BUILD_DIR}")
source_dir=$(realpath "$(dirname "$0")/..")
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then echo "ok: $what"; else fail "$what"; fi; }

if dpkg-query -W -f='${Status}' warden 2>/dev/null | grep -q 'install ok'; then
  echo "FAIL: a warden package is already installed on this machine; this test installs and purges its own" >&2
  exit 1
fi
if getent group warden >/dev/null; then
  echo "FAIL: a 'warden' group exists already; this test checks that the package creates and removes it" >&2
  exit 1
fi

work=$(mktemp -d)
daemon_pid=""
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  if dpkg-query -W -f='${Status}' warden 2>/dev/null | grep -q 'install ok'; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq warden >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# A sanitizer build's programs are 30 times the size (wardend stripped:
# 220 MB under ASan, 8 MB plain): xz -6 of them took over 10 minutes on two
# loaded cores. Its package goes uncompressed; the plain build's test packs
# what ships.
if grep -q '^WARDEN_SANITIZE:STRING=.' "$build_dir/CMakeCache.txt" 2>/dev/null; then
  export WARDEN_DEB_COMPRESSION=none
fi
deb=$("$source_dir/scripts/make_deb.sh" "$build_dir" "$work/out") || { echo "FAIL: make_deb.sh" >&2; exit 1; }
echo "built $deb"

# What the package says and holds.
control=$(dpkg-deb --field "$deb")
check "Depends names Debian's gRPC and the Python runtime" \
  grep -Eq '^Depends:.*libgrpc\+\+1\.51.*nodejs.*python3-numpy' <<<"$control"
check "Recommends names the interpreters of TypeScript, R and Java, and buildah" \
  grep -Eq '^Recommends:.*node-typescript.*r-base-core.*python3-rpy2.*default-jdk-headless.*buildah' <<<"$control"
contents=$(dpkg-deb --contents "$deb" | awk '{print $6}')
for path in ./usr/bin/wardend ./usr/bin/warden-keeper ./usr/bin/warden ./usr/bin/warden-run ./usr/bin/warden-python-zygote \
    ./usr/bin/warden-gateway ./usr/lib/warden/container-entrypoint ./usr/share/man/man1/warden-gateway.1.gz \
    ./usr/lib/warden/kernels/python/warden_kernel.py ./usr/lib/warden/kernels/node/warden_kernel.js \
    ./usr/lib/warden/kernels/bash/warden_kernel.sh ./usr/lib/warden/kernels/java/WardenKernel.java \
    ./usr/lib/warden/kernels/python/warden_r_kernel.py ./usr/lib/warden/kernels/python/warden_charts.py \
    ./lib/systemd/system/wardend.service \
    ./etc/warden/wardend.json ./usr/share/man/man1/wardend.1.gz ./usr/share/man/man1/warden.1.gz \
    ./usr/share/man/man1/warden-run.1.gz ./usr/share/doc/warden/operations.md; do
  check "the package holds $path" grep -qx "$path" <<<"$contents"
done
check "man page wardend(1) documents --check" \
  bash -c "dpkg-deb --fsys-tarfile '$deb' | tar -xO ./usr/share/man/man1/wardend.1.gz | gzip -d | grep -q -- 'check'"

# Install, as an operator would.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb" >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log" >&2; echo "FAIL: apt-get install" >&2; exit 1; }
dpkg-query -L warden > "$work/files"
check "the warden group exists" getent group warden
check "/var/lib/warden is root's alone (0700)" test "$(stat -c %a:%U /var/lib/warden 2>/dev/null)" = 700:root
check "the configuration lets the warden group use the socket" \
  grep -q '"socket_group": "warden"' /etc/warden/wardend.json
check "the configuration names the installed kernels" \
  grep -q '"kernels_dir": "/usr/lib/warden/kernels"' /etc/warden/wardend.json
# Only this pid namespace: wardend in containers (a swarm of them, say) is
# not what installing would have started.
check "installing started no wardend" bash -c '! pgrep --ns $$ --nslist pid -f "^/usr/bin/wardend" >/dev/null'
check "installing enabled nothing" test ! -e /etc/systemd/system/multi-user.target.wants/wardend.service
if ! systemd-analyze verify /lib/systemd/system/wardend.service >"$work/verify.log" 2>&1; then
  cat "$work/verify.log" >&2
  fail "systemd-analyze verify wardend.service"
else
  echo "ok: systemd-analyze verify wardend.service"
fi
check "the unit runs the installed keeper and wardend" \
  grep -Eq '^ExecStart=/usr/bin/warden-keeper .* /usr/bin/wardend ' /lib/systemd/system/wardend.service
check "man wardend finds the page" bash -c 'man -w wardend 2>/dev/null | grep -q wardend.1'

# The installed binaries: the check, then a daemon on a socket of this
# test's own (the configuration's /run/warden may be in use).
if /usr/bin/wardend --check --config /etc/warden/wardend.json >"$work/check.log" 2>&1; then
  echo "ok: installed wardend --check"
else
  cat "$work/check.log" >&2
  fail "installed wardend --check"
fi
socket="$work/run/wardend.sock"
mkdir -p "$work/run"
/usr/bin/wardend --config /etc/warden/wardend.json --listen "unix:$socket" --state-dir "$work/run" \
  >"$work/wardend.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 600); do [ -S "$socket" ] && break; sleep 0.1; done
check "the socket is group warden, mode 0660" test "$(stat -c %a:%G "$socket" 2>/dev/null)" = 660:warden
out=$(echo 'print(6 * 7)' | WARDEN_ADDR="unix:$socket" /usr/bin/warden exec - 2>&1)
check "a one-shot through the installed warden prints 42 (got: $out)" test "$out" = 42
kill "$daemon_pid"; wait "$daemon_pid"; daemon_pid=""

# Purge: nothing the package made is left.
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq warden >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log" >&2; fail "apt-get purge"; }
left=""
while read -r path; do
  case "$path" in /|/usr|/usr/bin|/usr/lib|/usr/share|/usr/share/doc|/usr/share/man|/usr/share/man/man1|/etc|/lib|/lib/systemd|/lib/systemd/system|/.) continue ;; esac
  [ -e "$path" ] && left="$left $path"
done < "$work/files"
check "purging removed every packaged file${left:+ (left:$left)}" test -z "$left"
for path in /etc/warden /var/lib/warden /usr/lib/warden /usr/share/doc/warden; do
  check "purging removed $path" test ! -e "$path"
done
check "purging removed the warden group" bash -c '! getent group warden >/dev/null'
check "the package is gone" bash -c "! dpkg-query -W -f='\${Status}' warden 2>/dev/null | grep -q installed"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; wardend's log:" >&2
  tail -20 "$work/wardend.log" >&2
  exit 1
fi
echo "all package checks passed"
