#!/bin/bash
# Runs a command as wardend runs in the fleet's containers: root with only
# the capabilities deploy/'s manifests add (capsh drops every other from the
# bounding set, so what root executes holds exactly those), less the one
# named by --without. Both manifests must add the same. The command learns
# what it holds from WARDEN_CONTAINER_CAPABILITIES.
#
#   container_capabilities.sh REPO [--without CAP] COMMAND...
set -euo pipefail
repo=$1
shift
without=NONE
if [ "${1:-}" = --without ]; then
  without=$2
  shift 2
fi
swarm=$(sed -n 's/^ *cap_add: *\[\(.*\)\]$/\1/p' "$repo/deploy/swarm/warden-stack.yml" | tr -d ' ')
kube=$(sed -n 's/^ *add: *\[\(.*\)\]$/\1/p' "$repo/deploy/kubernetes/daemonset.yaml" | tr -d ' ')
if [ -z "$swarm" ] || [ "$swarm" != "$kube" ]; then
  echo "the manifests add different capabilities: Swarm [$swarm], Kubernetes [$kube]" >&2
  exit 1
fi
keep=$(tr ',' '\n' <<<"$swarm" | grep -v -x -F "$without" | paste -sd, -)
wanted=$(tr 'A-Z,' 'a-z\n' <<<"$keep" | sed 's/^/cap_/')
drop=$(capsh --print | sed -n 's/^Bounding set =//p' | tr ',' '\n' | grep -v -x -F "$wanted" | paste -sd, -)

# A container's cgroup directory is root's and writable by it without
# CAP_DAC_OVERRIDE; a cgroup v1 hierarchy's root directory is not (0555).
# There the command runs in a group of its own, made first.
moved=()
for controller in memory pids cpu cpuacct freezer; do
  mount=/sys/fs/cgroup/$controller
  [ -f "$mount/cgroup.procs" ] || continue
  own=$(sed -n "s/^[0-9]*:\([^:]*,\)\?$controller\(,[^:]*\)\?:\(.*\)$/\3/p" /proc/self/cgroup)
  group=$mount${own%/}/container-capabilities-$$
  mkdir "$group"
  echo $$ >"$group/cgroup.procs"
  moved+=("$mount${own%/}")
done
status=0
WARDEN_CONTAINER_CAPABILITIES=$keep capsh --drop="$drop" -- -c 'exec "$@"' capsh "$@" || status=$?
for parent in "${moved[@]}"; do
  echo $$ >"$parent/cgroup.procs"
  rmdir "$parent/container-capabilities-$$" 2>/dev/null || true
done
exit $status
