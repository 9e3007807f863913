#!/bin/bash
# Inside the stock Debian 12 VM that tests/host/run.sh boots (`make test-host`):
# what an operator does with Warden's .deb on a host with systemd as PID 1
# and cgroup v2, step by step as issue #21 lists them, each step checked.
# Runs as root from warden-host-test.service; sandboxed code runs through the
# `warden` CLI as alice, an ordinary member of the socket's group. Under
# emulation everything is 10-30x slower than native: every wait polls with a
# generous deadline and nothing asserts a time.
#
#   guest.sh DEB SOURCE_DIR BUILD_DIR
set -uo pipefail
deb=$1 source_dir=$2 build_dir=$3
here=$source_dir/tests/host
failures=0
unit_cgroup=/sys/fs/cgroup/system.slice/wardend.service
host_id_base=1500000 host_id_count=65536   # deploy/wardend.json's executor ids
export DEBIAN_FRONTEND=noninteractive
# Scratch files out of the snapshots' way (sort spills into $TMPDIR).
export TMPDIR=/root/tmp
mkdir -p "$TMPDIR"
logs=/mnt/host/out   # the host keeps what is written here

step() { echo; echo "=== $* (at ${SECONDS}s)"; }
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }
# wait_for SECONDS COMMAND...: true once COMMAND is, polling every second.
wait_for() { local limit=$1; shift; for ((i = 0; i < limit; i++)); do "$@" && return 0; sleep 1; done; "$@"; }
as_alice() { runuser -u alice -- "$@"; }
json() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }
serving() { [ -S /run/warden/wardend.sock ] && as_alice warden exec - <<<'print(1)' 2>/dev/null | grep -qx 1; }
# The daemon itself (sandbox inits are clones of it, named wardend too).
wardend_pid() { awk '$1 == "daemon" {print $2}' /run/warden/wardend.state 2>/dev/null; }
# A wardend other than $1 has started (written its record) and listens.
new_wardend() { local p; p=$(wardend_pid); [ -n "$p" ] && [ "$p" != "$1" ] && [ -S /run/warden/wardend.sock ]; }
# The pids in a cgroup directory and every group beneath it.
procs_under() { find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null; }
# Processes running as a sandbox host id (deploy/wardend.json's range).
sandbox_processes() {
  ps -eo pid=,uid= | awk -v lo=$host_id_base -v hi=$((host_id_base + host_id_count)) '$2 >= lo && $2 < hi {print $1}'
}
# What must be as it was after the purge: files, users, groups, units, mounts.
snapshot() {
  find /etc /usr /opt /srv /var/lib /run /tmp -xdev \
    -path /var/lib/apt -prune -o -path /var/lib/dpkg -prune -o -path /var/lib/systemd -prune -o \
    -path /var/cache -prune -o -path /run/systemd -prune -o -path /run/udev -prune -o \
    -path /run/user -prune -o -path /run/log -prune -o -path /run/dbus -prune -o \
    -path /etc/ld.so.cache -prune -o -name '*-' -path '/etc/*' -prune -o \
    -path /var/lib/dhcp -prune -o -print 2>/dev/null | sort
  md5sum /etc/passwd /etc/group /etc/shadow /etc/gshadow
  systemctl list-unit-files --no-legend --no-pager | sort
  awk '{print $5, $9}' /proc/1/mountinfo | sort
  dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\n' | grep '^ii' | sort
}

step "the stock host"
echo "boot: $(systemctl is-system-running --wait)"
systemctl --no-legend --no-pager --failed
uname -r
systemctl --version | head -1
echo "cgroup: $(stat -fc %T /sys/fs/cgroup), controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
echo "AppArmor: $(cat /sys/module/apparmor/parameters/enabled 2>/dev/null), restrict_unprivileged_userns: $(cat /proc/sys/kernel/apparmor_restrict_unprivileged_userns 2>/dev/null || echo 'not on this kernel')"
check "systemd is PID 1" test "$(readlink /proc/1/exe)" = /usr/lib/systemd/systemd
check "cgroup v2 is the only hierarchy" test "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs
check "no cgroup v1 hierarchy is mounted" bash -c '! grep -q " cgroup " /proc/self/mounts'
check "v2 offers memory, pids and cpu" grep -qE '(^| )cpu( .*)? memory( .*)? pids' /sys/fs/cgroup/cgroup.controllers
check "no cgroup file named release_agent exists on v2" test -z "$(find /sys/fs/cgroup -name release_agent | head -1)"
check "AppArmor is on, as Debian 12 enables it" test "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" = Y
adduser --quiet --disabled-password --gecos '' alice
before=/root/before.snapshot
snapshot > "$before"

step "1. apt-get install ./warden.deb, wardend --check"
cp "$deb" /root/
if apt-get install -y -q --no-install-recommends "/root/$(basename "$deb")" > /root/apt.log 2>&1; then
  ok "apt-get install ./$(basename "$deb")"
else
  cat /root/apt.log; fail "apt-get install"
fi
check "installing started nothing" bash -c '! systemctl is-active -q wardend && ! pidof wardend'
adduser --quiet alice warden
wardend --check --config /etc/warden/wardend.json > /root/check.log 2>&1
check_rc=$?
cat /root/check.log
check "wardend --check exits 0" test $check_rc = 0
check "--check reports cgroup v2" grep -q '^\[ok\] *cgroups: cgroup v2' /root/check.log
check "--check reports the delegated controllers" grep -qE '^ *delegated controllers: .*memory.*pids' /root/check.log
check "--check enables memory, pids and cpu for sandboxes" grep -qx '  controllers: memory pids cpu' /root/check.log
check "--check names AppArmor's user-namespace sysctl" grep -q 'apparmor.*kernel.apparmor_restrict_unprivileged_userns' /root/check.log
for language in python javascript bash; do
  check "--check starts a $language worker" grep -qE "^  $language: ok, started in" /root/check.log
done
check "--check left no transient scope or cgroup behind" \
  test -z "$(find /sys/fs/cgroup -name 'warden-check*' -o -name 'run-*.scope' | head -1)"
cp /root/check.log "$logs/"

step "2. systemctl enable --now wardend"
mounts_before_start=$(awk '{print $5, $9}' /proc/1/mountinfo | sort)
start=$SECONDS
systemctl enable --now wardend > /root/enable.log 2>&1
enable_rc=$?
cat /root/enable.log
echo "systemctl enable --now returned $enable_rc after $((SECONDS - start)) s"
check "systemctl enable --now succeeds" test $enable_rc = 0
check "the unit is active" systemctl is-active -q wardend
# Type=notify: the start returned only once wardend served.
check "the socket was there when the start returned" test -S /run/warden/wardend.sock
check "the socket is root:warden, 0660" test "$(stat -c %U:%G:%a /run/warden/wardend.sock)" = root:warden:660
systemctl status --no-pager wardend | head -12
keeper=$(systemctl show -P MainPID wardend)
check "the main process is warden-keeper" test "$(readlink /proc/$keeper/exe)" = /usr/bin/warden-keeper
echo "cgroup tree:"; find $unit_cgroup -mindepth 1 -maxdepth 1 -type d | sort
check "the unit's cgroup holds no process" test -z "$(cat $unit_cgroup/cgroup.procs)"
check "the unit's cgroup enables memory, pids and cpu for its children" \
  grep -qE 'cpu .*memory .*pids' $unit_cgroup/cgroup.subtree_control
check "the keeper and its launcher are in keeper/" test "$(wc -l < $unit_cgroup/keeper/cgroup.procs)" = 2
check "the keeper is in keeper/" grep -qx "$keeper" $unit_cgroup/keeper/cgroup.procs
check "wardend is in a leaf of its own" \
  grep -qx "$(wardend_pid)" $unit_cgroup/warden-"$(wardend_pid)"-*.supervisor/cgroup.procs
out=$(as_alice warden exec - <<<'print(6 * 7)' 2>&1)
check "a one-shot as alice prints 42 (got: $out)" test "$out" = 42
session=$(as_alice warden session create 2>&1)
as_alice warden exec --session "$session" - <<<'x = 41' >/dev/null 2>&1
out=$(as_alice warden exec --session "$session" - <<<'print(x + 1)' 2>&1)
check "a session as alice keeps x (got: $out)" test "$out" = 42
out=$(runuser -u nobody -- warden exec - <<<'print(1)' 2>&1)
check "a user outside the warden group is refused" grep -qi 'permission denied' <<<"$out"

step "3. limits under cgroup v2, from inside sandboxes"
r=$(as_alice warden exec --json --memory-mb 64 - <<<'x = bytearray(512 << 20)')
check "512 MiB in a 64 MiB sandbox is MEMORY_LIMIT (got: $(json 'd["outcome"]' <<<"$r"))" \
  test "$(json 'd["outcome"]' <<<"$r")" = MEMORY_LIMIT
r=$(as_alice warden exec --json --memory-mb 64 - <<<'import os, signal; os.kill(os.getpid(), signal.SIGKILL)')
check "a SIGKILL that is no OOM is SIGNALED, not MEMORY_LIMIT (got: $(json 'd["outcome"]' <<<"$r"))" \
  test "$(json 'd["outcome"]' <<<"$r")" = SIGNALED
# A session's OOM, read back from its own cgroup's memory.events.
oom_session=$(as_alice warden session create --memory-mb 96)
as_alice warden exec --session "$oom_session" - <<<'print(1)' >/dev/null
group=$(grep -l . $unit_cgroup/warden-*/*/memory.max 2>/dev/null | xargs grep -lx $((96 << 20)) | head -1)
group=${group%/memory.max}
echo "the session's cgroup: $group"
r=$(as_alice warden exec --json --session "$oom_session" - <<<'x = bytearray(512 << 20)')
check "the session's cell is MEMORY_LIMIT (got: $(json 'd["outcome"]' <<<"$r"))" \
  test "$(json 'd["outcome"]' <<<"$r")" = MEMORY_LIMIT
check "the session's cgroup counted the OOM kill (memory.events: $(grep oom_kill "$group/memory.events" 2>/dev/null | paste -sd' '))" \
  bash -c "[ \"\$(awk '\$1 == \"oom_kill\" {print \$2}' '$group/memory.events')\" -ge 1 ]"
as_alice warden session close "$oom_session" >/dev/null
out=$(as_alice warden exec - < "$here/guest/fork_count.py")
echo "forks from inside: $out"
check "forking is stopped at the pids limit with EAGAIN (got: $out)" \
  bash -c "read n e <<<'$out'; [ \"\$e\" = EAGAIN ] && [ \"\$n\" -lt 64 ]"
# The classic bomb; the one-shot's own shell then waits, so that the bomb
# keeps forking until the wall clock ends the run.
as_alice warden exec --json --language bash --timeout-ms 20000 - <<<':(){ :|:& };:; sleep 30' > /root/bomb.json 2>&1 &
bomb=$!
# The bomb's group: the one sandbox group whose pids.current climbs; its
# highest count, read while the bomb keeps forking.
peak=0 bomb_group="" limit="" events=""
for ((i = 0; i < 80; i++)); do
  for current in $unit_cgroup/warden-*/*/pids.current $unit_cgroup/warden-*/*/*/pids.current; do
    n=$(cat "$current" 2>/dev/null) || continue
    if [ "${n:-0}" -gt "$peak" ]; then
      peak=$n bomb_group=${current%/pids.current}
      limit=$(cat "$bomb_group/pids.max" 2>/dev/null)
    fi
  done
  if [ -n "$bomb_group" ] && e=$(grep max "$bomb_group/pids.events" 2>/dev/null); then events=$e; fi
  sleep 0.25
done
wait $bomb
echo "fork bomb: $bomb_group held $peak tasks at most, pids.max $limit, pids.events: $events; outcome $(json 'd["outcome"]' < /root/bomb.json)"
check "a fork bomb is held at its sandbox's pids.max ($peak of ${limit:-?})" \
  bash -c "[ -n '$limit' ] && [ '$peak' -le '$limit' ] && [ '$peak' -ge \$(( ${limit:-0} - 8 )) ]"
check "its group's own pids.events counted the forks it refused ($events)" \
  bash -c "[ \"\$(awk '{print \$2}' <<<'$events')\" -ge 1 ]"
check "the fork bomb's group and its processes are gone" wait_for 60 test ! -e "$bomb_group"
r=$(as_alice warden exec --json --cpu-ms 2000 --timeout-ms 60000 - <<<'while True: pass')
check "2 s of CPU in a spinning loop is CPU_TIMEOUT (got: $(json 'd["outcome"]' <<<"$r"), cpu_ms $(json 'd.get("cpu_ms")' <<<"$r"))" \
  test "$(json 'd["outcome"]' <<<"$r")" = CPU_TIMEOUT
# cpu.max: one core a sandbox (cpu_percent 100); two busy processes inside
# get one core's worth between them, whatever the host has.
out=$(as_alice warden exec --timeout-ms 60000 - <<'PY'
import os, time
start_wall, start_cpu = time.monotonic(), os.times()
kids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + 5
        while time.monotonic() < end:
            pass
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
t = os.times()
print(f"{(t.children_user + t.children_system) / (time.monotonic() - start_wall):.2f}")
PY
)
check "two busy processes in one sandbox get at most one core (cpu.max; got $out cores)" \
  /usr/bin/python3 -c "import sys; sys.exit(0 if 0 < float('$out') <= 1.15 else 1)"
# cpu.weight: each sandbox is a group of equal weight, so on one CPU a
# sandbox with one busy process gets as much as a neighbour with four
# (in one flat group it would get a fifth).
as_alice warden exec --timeout-ms 120000 --cpu-ms 120000 - < <(sed 's/^n, seconds = .*/n, seconds = 4, 30.0/' "$here/guest/spinners.py") > /root/four.out 2>&1 &
four=$!
sleep 3
as_alice warden exec --timeout-ms 120000 --cpu-ms 120000 - < <(sed 's/^n, seconds = .*/n, seconds = 1, 20.0/' "$here/guest/spinners.py") > /root/one.out 2>&1
wait $four
share=$(/usr/bin/python3 "$here/guest/cpu_share.py" /root/four.out /root/one.out 2>&1)
echo "one busy process's share beside four in another sandbox, CPU 0's use, seconds together: $share"
check "a sandbox's weight does not depend on its process count (share $share)" \
  /usr/bin/python3 -c "import sys; s, used, _ = map(float, '$share'.split()); sys.exit(0 if s >= 0.35 and used <= 1.1 else 1)"
# Where everything is.
sessions=()
for language in python javascript bash; do sessions+=("$(as_alice warden session create --language $language)"); done
stray=""
for pid in $(sandbox_processes); do
  cg=$(cut -d: -f3 /proc/$pid/cgroup 2>/dev/null) || continue
  case "$cg" in /system.slice/wardend.service/warden-*/*) ;; *) stray="$stray $pid:$cg" ;; esac
done
check "every sandbox process is in a sandbox cgroup under wardend.service (stray:${stray:- none})" test -z "$stray"
check "sandbox processes exist to be checked" test -n "$(sandbox_processes)"
outside=""
for pid in $(pgrep -f '^/usr/bin/(wardend|warden-keeper|warden-python-zygote)'); do
  cg=$(cut -d: -f3 /proc/$pid/cgroup)
  case "$cg" in /system.slice/wardend.service/*) ;; *) outside="$outside $pid:$cg" ;; esac
done
check "no process of the unit is outside its cgroup (outside:${outside:- none})" test -z "$outside"
# Warden's groups: warden-<pid>-<n>[.supervisor] and --check's warden-check-<pid>.
warden_groups() { find /sys/fs/cgroup -regextype egrep -regex '.*/warden-(check-)?[0-9]+(-[0-9]+)?(\.supervisor)?' "$@"; }
check "no Warden cgroup exists outside the unit's" test -z "$(warden_groups -not -path "$unit_cgroup/*" | head -1)"

step "4. systemctl reload and kill -9 of wardend: every session answers with its state"
as_alice warden exec --session "${sessions[0]}" - <<<'state = "python kept"' >/dev/null
as_alice warden exec --session "${sessions[1]}" - <<<'globalThis.state = "javascript kept"' >/dev/null
as_alice warden exec --session "${sessions[2]}" - <<<'STATE="bash kept"' >/dev/null
answers() {
  local a b c d
  a=$(as_alice warden exec --session "${sessions[0]}" - <<<'print(state)' 2>&1)
  b=$(as_alice warden exec --session "${sessions[1]}" - <<<'console.log(state)' 2>&1)
  c=$(as_alice warden exec --session "${sessions[2]}" - <<<'echo "$STATE"' 2>&1)
  d=$(as_alice warden exec --session "$session" - <<<'print(x)' 2>&1)
  echo "$a|$b|$c|$d"
}
expected="python kept|javascript kept|bash kept|41"
check "before: every session answers" test "$(answers)" = "$expected"
first=$(wardend_pid)
systemctl reload wardend
check "systemctl reload: a new wardend serves" wait_for 240 new_wardend "$first"
wait_for 240 serving
got=$(answers)
check "after the reload every session answers with its state (got: $got)" test "$got" = "$expected"
check "the unit stayed active" systemctl is-active -q wardend
check "the unit's cgroup still holds no process" test -z "$(cat $unit_cgroup/cgroup.procs)"
second=$(wardend_pid)
kill -9 "$second"
check "kill -9: the keeper starts a new wardend" wait_for 240 new_wardend "$second"
wait_for 240 serving
got=$(answers)
check "after kill -9 every session answers with its state (got: $got)" test "$got" = "$expected"
check "the unit stayed active" systemctl is-active -q wardend
echo "cgroup tree:"; find $unit_cgroup -mindepth 1 -maxdepth 1 -type d | sort
check "no dead wardend's leaf is left" \
  test "$(find $unit_cgroup -mindepth 1 -maxdepth 1 -name 'warden-*.supervisor' | wc -l)" = 1
journalctl -u wardend --no-pager -o cat | grep -E 'adopted|reclaimed|keeper' | tail -8

step "5. systemctl restart and stop leave nothing"
old_keeper=$(systemctl show -P MainPID wardend)
old_sandboxes=$(sandbox_processes | paste -sd' ')
systemctl restart wardend
check "restart: active again" systemctl is-active -q wardend
check "restart: the old keeper is gone" bash -c "! kill -0 $old_keeper 2>/dev/null"
left=""
for pid in $old_sandboxes; do kill -0 "$pid" 2>/dev/null && left="$left $pid"; done
check "restart: no old sandbox process is left (left:${left:- none})" test -z "$left"
check "restart: the sessions were ended" bash -c "! runuser -u alice -- warden session show '${sessions[0]}' >/dev/null 2>&1"
now=$(wardend_pid)
check "restart: only the new wardend's groups are in the unit's cgroup" \
  test -z "$(find $unit_cgroup -mindepth 1 -maxdepth 1 -type d -name 'warden-*' ! -name "warden-$now-*")"
check "restart: the unit's cgroup holds no process" test -z "$(cat $unit_cgroup/cgroup.procs)"
systemctl stop wardend
check "stop: inactive" bash -c '! systemctl is-active -q wardend'
check "stop: the unit's cgroup is gone" test ! -e $unit_cgroup
check "stop: no Warden process is left" bash -c '! pgrep -f "^/usr/bin/(wardend|warden-keeper|warden-python-zygote)"'
check "stop: no sandbox process is left" test -z "$(sandbox_processes)"
check "stop: no Warden cgroup anywhere" test -z "$(warden_groups | head -1)"
check "stop: /run/warden is gone" test ! -e /run/warden
check "stop: no private /tmp of the unit is left" test -z "$(ls -d /tmp/systemd-private-*wardend* 2>/dev/null)"
check "stop: the host's mounts are as before the start" \
  diff <(echo "$mounts_before_start") <(awk '{print $5, $9}' /proc/1/mountinfo | sort)
check "stop: no mount of Warden's is left on the host" bash -c '! grep -qi warden /proc/1/mountinfo'

step "a unit that serves nothing is not active"
cp /etc/warden/wardend.json /root/wardend.json.good
echo '{"listen": ["unix:/nonexistent/dir/wardend.sock"]}' > /etc/warden/wardend.json
systemctl start wardend > /root/start.log 2>&1
start_rc=$?
cat /root/start.log
check "systemctl start fails when wardend cannot serve (rc $start_rc)" test $start_rc != 0
check "is-active is false" bash -c '! systemctl is-active -q wardend'
check "after its restarts the unit is failed" wait_for 300 systemctl is-failed -q wardend
journalctl -u wardend --no-pager -o cat | grep -E 'giving up|gave up' | tail -3
cp /root/wardend.json.good /etc/warden/wardend.json
systemctl reset-failed wardend
check "with the configuration mended it starts" systemctl start wardend
victim=$(as_alice warden session create)
echo '{' > /etc/warden/wardend.json
systemctl reload wardend
check "a wardend that keeps failing after a reload: the keeper gives up and the unit fails" \
  wait_for 300 systemctl is-failed -q wardend
check "is-active is false" bash -c '! systemctl is-active -q wardend'
check "the held sessions were ended" test -z "$(sandbox_processes)"
check "nothing of the unit is left" test ! -e $unit_cgroup
journalctl -u wardend --no-pager -o cat | grep -E 'giving up|gave up' | tail -3
cp /root/wardend.json.good /etc/warden/wardend.json
systemctl reset-failed wardend

step "6. the escape tests that concern cgroups"
systemd-run --scope --quiet --property=Delegate=yes -- "$build_dir/bin/escape_test" \
  --gtest_filter='*Cgroup*:*cgroup*:*ForkBomb*:*Memory*:*MountTmpfs*:*Unshare*:*Clone*:*Oom*' > /root/escape.log 2>&1
escape_rc=$?
cp /root/escape.log "$logs/"
grep -E '^\[ *(OK|FAILED|PASSED) ' /root/escape.log
check "the cgroup escape tests pass on cgroup v2 (rc $escape_rc)" test $escape_rc = 0
check "they ran" grep -qE '^\[  PASSED  \] [1-9][0-9]* tests' /root/escape.log
systemctl start wardend
out=$(as_alice warden exec - < "$source_dir/tests/testcases/sys_and_cgroups.py" 2>&1)
echo "$out"
check "through the packaged unit too, a sandbox sees no cgroupfs" \
  test "$out" = "$(printf '/sys exists: False\nsysfs or cgroup mounts: 0\nown cgroup paths: /\ncgroup control files: none')"
systemctl stop wardend

step "7. apt-get purge"
apt-get purge -y -q warden > /root/purge.log 2>&1 || { cat /root/purge.log; fail "apt-get purge"; }
check "the package is gone" bash -c "! dpkg-query -W -f='\${Status}' warden 2>/dev/null | grep -q installed"
after=/root/after.snapshot
snapshot > "$after"
if diff "$before" "$after" > /root/purge.diff; then
  ok "the system is as it was before the install (files, users, groups, units, mounts, packages)"
else
  cat /root/purge.diff; fail "the system is not as it was"
fi

journalctl -u wardend --no-pager -o short-monotonic > "$logs/wardend.journal" 2>&1
cp /root/purge.diff "$logs/" 2>/dev/null
echo
if [ $failures = 0 ]; then echo "ALL HOST CHECKS PASSED"; exit 0; fi
echo "$failures HOST CHECK(S) FAILED"
exit 1
