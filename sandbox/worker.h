// Worker: one live sandbox, seen from the supervisor.
//
// Created by Executor::Spawn, a Worker owns everything of one sandbox: the
// init's pidfd (the whole pid namespace dies with it), the cgroup, the pipes
// of the program's stdin/stdout/stderr, the optional channel socket (fd 3 in
// the program), the control socket to the init and the seccomp listener.
// Wait() is the event pump: it handles the control socket and seccomp
// notifications itself and tells the caller what is ready. Destroying a
// Worker kills every process in it and removes its cgroup.
//
// A Worker is used by one thread at a time.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sandbox/cgroup.h"
#include "sandbox/recycle_pool.h"
#include "sandbox/unique_fd.h"

namespace warden {

// Every handle of one sandbox, as a Worker holds them (for the keeper,
// docs/keeper-design.md); a Worker may lack some (no channel, no listener).
struct WorkerHandles {
  UniqueFd init_pidfd, control, stdin_fd, stdout_fd, stderr_fd, channel, listener, program_pidfd;
};

class Worker {
 public:
  // What Wait() found ready; several may be set at once.
  enum Ready : unsigned {
    kStdout = 1 << 0,         // stdout_fd() has data or EOF
    kStderr = 1 << 1,         // stderr_fd() has data or EOF
    kChannel = 1 << 2,        // channel_fd() has data or EOF
    kStdinWritable = 1 << 3,  // asked for, and stdin_fd() can take more
    kEnded = 1 << 4,          // the program ended, failed to start, or the sandbox died
    kViolation = 1 << 5,      // a seccomp violation is pending: kill and report
    kTimedOut = 1 << 6,       // the deadline passed first
    kExtra = 1 << 7,          // the caller's extra_fd is readable
  };

  // Rebuilds the Worker of a sandbox another wardend started and the
  // keeper held across that wardend's end: `handles` are the ones that
  // wardend's Worker had (DuplicateHandles), `cgroup` its group (may be
  // null), the program's host ids as they were. What the sandbox reported
  // meanwhile (its program ended, a violation) is read by Wait as usual.
  static absl::StatusOr<std::unique_ptr<Worker>> Adopt(WorkerHandles handles,
                                                       std::unique_ptr<Cgroup> cgroup,
                                                       uid_t program_host_uid, gid_t program_host_gid);
  // Duplicates of every handle (close-on-exec), for the keeper to hold.
  absl::StatusOr<WorkerHandles> DuplicateHandles() const;
  // The cgroup's directories (empty without one), to find it again on adopt.
  std::vector<std::string> CgroupPaths() const;

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker();

  // Waits until something is ready or `deadline`. `want_stdin` asks for
  // kStdinWritable; `extra_fd` (not owned, may be -1) is polled for input
  // too and reported as kExtra (a host fd pumped into stdin, a wake-up fd).
  unsigned Wait(absl::Time deadline, bool want_stdin = false, int extra_fd = -1);

  int stdin_fd() const { return stdin_.get(); }
  int stdout_fd() const { return stdout_.get(); }
  int stderr_fd() const { return stderr_.get(); }
  int channel_fd() const { return channel_.get(); }
  void CloseStdin() { stdin_.Reset(); }
  void CloseStdout() { stdout_.Reset(); }
  void CloseStderr() { stderr_.Reset(); }

  // The program's state as reported by the sandbox.
  bool ended() const { return main_exited_ || init_exited_ || setup_error_.has_value(); }
  bool main_exited() const { return main_exited_; }
  int main_status() const { return main_status_; }  // a wait status
  const std::optional<std::string>& violation() const { return violation_; }
  const std::optional<std::string>& setup_error() const { return setup_error_; }

  // Sends `sig` to the program's process group (its children included).
  absl::Status Signal(int sig);
  // Kills every process of the sandbox but its init: the program ends (and
  // is reported as ended) while the sandbox, its files and cgroup remain.
  absl::Status KillProgram();
  // Starts the program afresh in the same sandbox (same namespaces,
  // workspace, /tmp and cgroup) once the old one has ended (KillProgram and
  // Wait for kEnded first). The new program reports in through Wait().
  absl::Status Respawn();
  // Kills every process in the sandbox now and reaps the init. Idempotent.
  void Kill();

  // True while the sandbox's init lives (the program may have ended).
  bool SandboxAlive() const;

  // The sandbox's root as seen from the host (through the init's
  // /proc/<pid>/root), valid while the init lives. Resolve paths beneath it
  // only with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS ...).
  std::string RootPath() const;
  // The host ids the program runs as (files the supervisor writes into the
  // sandbox are given to them).
  uid_t program_host_uid() const { return program_host_uid_; }
  gid_t program_host_gid() const { return program_host_gid_; }

  // Cumulative for the whole sandbox; nullopt in degraded mode.
  std::optional<CgroupUsage> Usage() const;
  bool has_cgroup() const { return cgroup_ != nullptr; }
  absl::Time started() const { return started_; }
  // When each stage of building this sandbox ended (the bench's per-stage
  // breakdown of a sandbox's life; a stage not reached is absl::Time()).
  struct StageTimes {
    absl::Time begin;          // Spawn called
    absl::Time planned;        // mount plan, seccomp program, rlimits built
    absl::Time cgroup;         // cgroup created and limited
    absl::Time cloned;         // init cloned into its namespaces (by a fork server or here)
    absl::Time released;       // id maps written, cgroup joined, "go" sent
    absl::Time payload_ready;  // the containment sequence done (mounts ... seccomp), as seen here
  };
  const StageTimes& stage_times() const { return stage_times_; }
  // Host pid of the sandbox's init (tests and diagnostics).
  pid_t init_pid() const { return init_pid_; }

 private:
  friend class Executor;
  Worker() = default;

  void HandleControl();
  void HandleViolation();
  // Finishes the child's setup failure message with the mount target.
  std::string DescribeFailure(int stage, int error, int op_index) const;

  pid_t init_pid_ = -1;
  UniqueFd init_pidfd_;
  bool reaped_ = false;
  bool adopted_ = false;  // the init is not our child: the keeper reaps it
  std::unique_ptr<Cgroup> cgroup_;
  // Where the namespaces and the cgroup go back when the sandbox ends;
  // empty when they were made for this sandbox alone.
  std::weak_ptr<RecyclePool> recycle_pool_;
  bool cgroup_recyclable_ = false;  // false: nested in a session's group
  PooledNamespaces namespaces_;  // invalid: fresh ones, owned by the init
  UniqueFd stdin_, stdout_, stderr_, channel_, control_, listener_;
  UniqueFd program_pidfd_;  // the program (sent by it just before execve)
  pid_t program_pid_ = -1;  // its host pid, also its process group
  uid_t program_host_uid_ = 0;
  gid_t program_host_gid_ = 0;
  absl::Time started_;
  StageTimes stage_times_;
  std::vector<std::string> mount_targets_;  // for setup error messages

  bool main_exited_ = false;
  int main_status_ = 0;
  bool init_exited_ = false;
  std::optional<std::string> violation_;
  std::optional<std::string> setup_error_;
};

}  // namespace warden
