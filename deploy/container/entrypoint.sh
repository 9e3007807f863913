#!/bin/sh
# wardend's entrypoint in a container (Docker Swarm, Kubernetes; docs/fleet.md):
#   /usr/lib/warden/container-entrypoint wardend --config /etc/warden/wardend.json
#
# A container runtime masks parts of the container's /proc (kcore, keys,
# sys, sysrq-trigger, ...), and the kernel then refuses the fresh procfs
# every sandbox mounts in its own user and pid namespaces: a procfs may be
# mounted there only if one is already fully visible in the mount
# namespace. This mounts a private, unmasked one for that check. It lives in
# the container's own mount namespace (nothing outside sees it), and no
# sandbox sees it either: each pivots into a root of its own. This needs
# CAP_SYS_ADMIN, which wardend needs anyway; it is why `--privileged` is
# not needed.
set -eu
visible=/run/warden/proc
mkdir -p "$visible"
if ! grep -qs " $visible proc " /proc/self/mounts; then
  mount -t proc -o nosuid,nodev,noexec proc "$visible"
fi
exec "$@"
