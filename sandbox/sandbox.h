// Sandbox: runs one program in a fresh, fully isolated worker and reports
// what it did.
//
// An Executor is created once per process (it detects the host, owns Warden's
// cgroup subtree and builds the seccomp policy); Run() may then be called
// from any thread. Each run gets its own user, pid, mount, net, ipc, uts and
// cgroup namespaces, a read-only root built with pivot_root, a cgroup with
// the run's limits, dropped credentials and the seccomp policy; the
// supervisor enforces the wall clock, CPU time and output caps, and kills the
// whole tree when the main process ends. See docs/security.md.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sandbox/cgroup.h"
#include "sandbox/egress_gate.h"
#include "sandbox/fork_server.h"
#include "sandbox/limits.h"
#include "sandbox/mount_plan.h"
#include "sandbox/process_title.h"
#include "sandbox/recycle_pool.h"
#include "sandbox/result.h"
#include "sandbox/seccomp_policy.h"
#include "sandbox/worker.h"

namespace warden {

struct SandboxSpec {
  // argv[0] is the program: an absolute path, or a name looked up in
  // /usr/local/bin, /usr/bin and /bin.
  std::vector<std::string> argv;
  // The program's whole environment ("KEY=value"); nothing is inherited.
  std::vector<std::string> env = DefaultEnvironment();
  std::string cwd = "/workspace";
  FilesystemSpec filesystem;
  Limits limits;
  // Standard input: `stdin_data`, or, when stdin_fd >= 0, whatever the
  // supervisor reads from that host fd (not owned) until EOF.
  std::string stdin_data;
  int stdin_fd = -1;
  // What the sandbox is for, in its init's command line as `ps` shows it:
  // "warden-sandbox NAME" (a session's id, a pool's language; empty: the
  // name alone). Worker::Retitle changes it later.
  std::string name;

  static std::vector<std::string> DefaultEnvironment();
};

// `base` ("KEY=value" entries) with `overrides` applied: an entry of
// `overrides` replaces the one of `base` with its key, or is added.
std::vector<std::string> MergeEnvironment(std::vector<std::string> base,
                                          const std::vector<std::string>& overrides);

struct ExecutorOptions {
  CgroupOptions cgroup;
  // Without writable cgroups the executor refuses to start, unless this is
  // set: then memory, CPU and pids are limited by rlimits only (weaker: no
  // OOM detection, no CPU accounting across processes) and every Result says
  // so in its message. Never chosen silently.
  bool allow_degraded = false;
  // Host ids the sandbox user maps to when running as root: each run takes
  // the next of `host_id_count` ids from `host_id_base`, so concurrent
  // sandboxes never share a host uid. Rootless runs map to the caller's id.
  uid_t host_id_base = 1'500'000;
  uint32_t host_id_count = 65'536;
  SeccompOptions seccomp;
  // Reuse the network, IPC and UTS namespaces and the cgroups of finished
  // sandboxes (RecyclePool: only what passes its checks) instead of
  // building them for every sandbox. Needs real root and cgroups; without
  // them, or off, every sandbox gets fresh ones.
  bool recycle = true;
};

struct SpawnOptions {
  // Give the program a private socket at fd 3 (WARDEN_CHANNEL_FD) whose
  // other end is Worker::channel_fd(): the kernels' control channel.
  bool channel = false;
  // Clone the sandbox through this fork server (not owned) instead of from
  // this process: the program then runs the server's pre-initialised code
  // in place of execve (spec.argv only names it).
  ForkServer* fork_server = nullptr;
  // Run as the host ids of this slot (Executor::ReserveIdentity) instead of
  // fresh ones: sandboxes that share a workspace directory must also share
  // the owner of its files.
  std::optional<uint64_t> identity_slot;
  // Nest the sandbox's cgroup in this one (not owned; from CreateGroup), so
  // that its limits and accounting are shared with the group's other
  // sandboxes. Null: a group of its own in the executor's subtree.
  Cgroup* parent_cgroup = nullptr;
  // A machine (sandbox/machine.h): the sandbox runs no program of its own
  // (spec.argv is ignored and may be empty); its init starts processes on
  // request. The Worker reports ready once the sandbox is built.
  bool machine = false;
  // The sandbox's way out: its init listens on 127.0.0.1:kEgressPort before
  // anything runs and the listener goes to this gate (egress_gate.h), until
  // the sandbox ends. Null: nothing listens there (connections to the
  // proxy the environment names are refused at once).
  std::shared_ptr<EgressGate> egress;
};

class Executor {
 public:
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const ExecutorOptions& options);
  ~Executor();

  // Runs spec to completion. Never throws; problems with the spec or the
  // host come back as SETUP_ERROR / INTERNAL results with a message.
  Result Run(const SandboxSpec& spec);

  // Starts spec's program in a fresh sandbox and returns the live Worker;
  // the caller supervises it (limits other than the cgroup's and rlimits are
  // the caller's to enforce). Errors in the spec come back here; failures
  // inside the sandbox's setup are reported by the Worker.
  absl::StatusOr<std::unique_ptr<Worker>> Spawn(const SandboxSpec& spec,
                                                const SpawnOptions& options = {});

  // A slot of host ids for sandboxes that are to run as one user
  // (SpawnOptions::identity_slot), and the program's host uid and gid in it.
  uint64_t ReserveIdentity() { return next_run_.fetch_add(1); }

  // A cgroup for several sandboxes to share (SpawnOptions::parent_cgroup):
  // `limits` cap them all together. Null in degraded mode.
  absl::StatusOr<std::unique_ptr<Cgroup>> CreateGroup(const CgroupLimits& limits);
  std::pair<uid_t, gid_t> ProgramHostIds(uint64_t slot) const;

  bool degraded() const { return cgroups_ == nullptr; }
  // Whether each sandbox's user namespace has an owner of its own on the
  // host (CloneSandboxInit), so that the per-user kernel counts made inside
  // are the sandbox's alone; and a sentence for the log saying which owner
  // they have and why.
  bool own_namespace_owners() const { return own_owners_; }
  const std::string& namespace_owners() const { return namespace_owners_; }
  const CgroupManager* cgroups() const { return cgroups_.get(); }
  CgroupManager* mutable_cgroups() { return cgroups_.get(); }
  // Null when sandboxes are not recycled (ExecutorOptions::recycle).
  const RecyclePool* recycle_pool() const { return recycle_.get(); }

 private:
  Executor() = default;

  ExecutorOptions options_;
  std::unique_ptr<CgroupManager> cgroups_;  // null in degraded mode
  // Shared with the Workers, which give their namespaces and cgroup back
  // when they end (and drop them if the executor is gone by then).
  std::shared_ptr<RecyclePool> recycle_;
  SeccompProgram seccomp_;
  bool rootless_ = false;
  bool own_owners_ = false;
  std::string namespace_owners_;
  // This process's memory layout, for the inits cloned from it to show
  // their own command line (process_title.h); unset: their name only.
  std::optional<ProcessLayout> layout_;
  std::atomic<uint64_t> next_run_{0};
};

}  // namespace warden
