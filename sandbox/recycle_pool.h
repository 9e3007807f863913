// RecyclePool: the kernel objects of a sandbox that hold no state once its
// processes are dead - a network namespace with only loopback, an IPC
// namespace, a UTS namespace and an emptied cgroup - kept for the next
// sandbox instead of being built and torn down for every one.
//
// Creating and destroying them is most of the kernel's cost of a one-shot
// sandbox (a network namespace's teardown runs in a kworker, but on the same
// two cores). A fresh user, pid and mount namespace, a fresh tmpfs root and
// fresh credentials stay per sandbox; only these are reused, and only after
// checks that find them exactly as a fresh one would be:
//   - network: owned by the host's user namespace (the sandbox's init holds
//     no capability in it: it cannot add interfaces, routes, rules or change
//     sysctls), loopback brought up here; reused only when the listings and
//     counters of /proc/net (sockets of every family, TIME_WAIT included,
//     interface and protocol counters) read exactly as they did when it was
//     made, i.e. the run sent nothing and left nothing.
//   - IPC: owned by the host's user namespace (its sysctls are not the
//     sandbox's to change); reused only when the run created no SysV object
//     at all: a probe allocation must get the id that follows the pool's own
//     previous probe, which any object created (even if removed since) moves.
//   - UTS: owned by the host's user namespace (sethostname is EPERM in the
//     sandbox); its names are checked and set again for every run.
//   - cgroup: reused only when it holds no process (cgroup.procs read empty
//     in every hierarchy), with the new run's limits written and the peak
//     memory and CPU counters reset (Cgroup::Reuse); otherwise removed.
// Whatever fails a check is dropped (the kernel frees it) and counted, never
// handed out. The argument and the tests that prove it: docs/security.md,
// "Recycled namespaces and cgroups".
//
// Needs real root (the namespaces must be owned by the host's user
// namespace); Create fails otherwise and the executor builds every sandbox
// afresh. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "sandbox/cgroup.h"
#include "sandbox/unique_fd.h"

namespace warden {

// One sandbox's network, IPC and UTS namespaces (nsfs fds), with what the
// pool needs to check them when they come back.
struct PooledNamespaces {
  UniqueFd net, ipc, uts;
  std::string net_fingerprint;  // /proc/net as read right after it was made
  int ipc_probes = 0;           // SysV probe allocations made in `ipc` so far
  int uses = 0;                 // sandboxes it has served
  bool valid() const { return net && ipc && uts; }
};

// Puts the calling thread into the given network, IPC and UTS namespaces
// (any fd may be -1: left as is) and back into the host's on destruction.
// A thread that could not get back would serve the daemon from inside a
// sandbox's network, so that aborts the process.
class ScopedNamespaces {
 public:
  // `host` holds the fds to return to (not owned; the pool's).
  ScopedNamespaces(const PooledNamespaces& host, int net, int ipc, int uts);
  ~ScopedNamespaces();
  ScopedNamespaces(const ScopedNamespaces&) = delete;
  ScopedNamespaces& operator=(const ScopedNamespaces&) = delete;
  // errno of the first setns that failed, 0 when all succeeded.
  int error() const { return error_; }

 private:
  const PooledNamespaces& host_;
  int error_ = 0;
  bool moved_net_ = false, moved_ipc_ = false, moved_uts_ = false;
};

struct RecyclePoolStats {
  int64_t namespaces_made = 0;      // built afresh (pool empty)
  int64_t namespaces_reused = 0;    // handed out again after passing the checks
  int64_t net_dirty = 0;            // dropped: sockets or counters differ from fresh
  int64_t ipc_dirty = 0;            // dropped: the run created SysV objects
  int64_t namespaces_retired = 0;   // dropped: served kMaxUses sandboxes
  int64_t namespaces_not_empty = 0;  // dropped: their cgroup still held processes
  int64_t cgroups_reused = 0;
  int64_t cgroups_dropped = 0;      // not empty, or could not be reset
  int idle_namespaces = 0;
  int idle_cgroups = 0;
};

class RecyclePool {
 public:
  // At most `max_idle` of each kind wait for reuse; more are dropped.
  static absl::StatusOr<std::unique_ptr<RecyclePool>> Create(int max_idle = 64);

  // A set of namespaces for one sandbox, its hostname set to `hostname`:
  // recycled when one passed its checks, else made now.
  absl::StatusOr<PooledNamespaces> TakeNamespaces(const std::string& hostname);
  // A sandbox's namespaces once every process of it is dead (its pid
  // namespace's init reaped and its cgroup empty); `cgroup_empty` false
  // drops them unchecked. Checks them and keeps them if clean.
  void ReturnNamespaces(PooledNamespaces namespaces, bool cgroup_empty);

  // An emptied cgroup reset to `limits`, or nullptr when none is idle.
  std::unique_ptr<Cgroup> TakeCgroup(const CgroupLimits& limits);
  // Keeps `group` for reuse if it holds no process; removes it otherwise.
  void ReturnCgroup(std::unique_ptr<Cgroup> group);

  RecyclePoolStats Stats() const;
  // The directories of the cgroups waiting for reuse (each empty).
  std::vector<std::string> IdleCgroupPaths() const;
  // The host's namespaces (for ScopedNamespaces).
  const PooledNamespaces& host() const { return host_; }

  // A set of namespaces is dropped after this many sandboxes: the IPC probe
  // ids must stay below the kernel's smallest id cycle (64).
  static constexpr int kMaxUses = 60;

 private:
  RecyclePool() = default;
  absl::StatusOr<PooledNamespaces> Make();
  // True when `ns` reads as it did when made; sets *which to "net" or "ipc"
  // when not.
  bool Clean(PooledNamespaces& ns, const char** which);

  PooledNamespaces host_;
  int max_idle_ = 64;
  mutable absl::Mutex mu_;
  std::deque<PooledNamespaces> idle_ ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<Cgroup>> idle_cgroups_ ABSL_GUARDED_BY(mu_);
  RecyclePoolStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace warden
