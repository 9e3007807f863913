// Program: one program running in a sandbox, as its supervisor sees it -
// its standard streams and channel, whether and how it ended, a violation
// of the seccomp policy - whatever started it. A Worker (worker.h) is the
// program a sandbox was built for, and owns the sandbox; a MachineProcess
// (machine.h) is one more program started inside a running sandbox, a
// machine, which owns the sandbox instead. Sessions and commands drive
// either through this interface.
//
// A Program is used by one thread at a time.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sandbox/cgroup.h"
#include "sandbox/egress_gate.h"
#include "sandbox/unique_fd.h"

namespace warden {

// Every handle of one sandbox, as a Worker holds them (for the keeper,
// docs/keeper-design.md); a Worker may lack some (no channel, no listener).
struct WorkerHandles {
  UniqueFd init_pidfd, control, stdin_fd, stdout_fd, stderr_fd, channel, listener, program_pidfd;
};

class Program {
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
    kReportedIn = 1 << 8,     // the program (or a machine's sandbox) reported in
  };

  // When each stage of building a sandbox ended (the bench's per-stage
  // breakdown of a sandbox's life; a stage not reached is absl::Time()).
  struct StageTimes {
    absl::Time begin;          // Spawn called
    absl::Time planned;        // mount plan, seccomp program, rlimits built
    absl::Time cgroup;         // cgroup created and limited
    absl::Time cloned;         // init cloned into its namespaces (by a fork server or here)
    absl::Time released;       // id maps written, cgroup joined, "go" sent
    absl::Time payload_ready;  // the containment sequence done (mounts ... seccomp), as seen here
  };

  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  virtual ~Program() = default;

  // Waits until something is ready or `deadline`. `want_stdin` asks for
  // kStdinWritable; `extra_fd` (not owned, may be -1) is polled for input
  // too and reported as kExtra (a host fd pumped into stdin, a wake-up fd).
  virtual unsigned Wait(absl::Time deadline, bool want_stdin = false, int extra_fd = -1) = 0;

  int stdin_fd() const { return stdin_.get(); }
  int stdout_fd() const { return stdout_.get(); }
  int stderr_fd() const { return stderr_.get(); }
  int channel_fd() const { return channel_.get(); }
  void CloseStdin() { stdin_.Reset(); }
  void CloseStdout() { stdout_.Reset(); }
  void CloseStderr() { stderr_.Reset(); }

  // The program's state as reported by the sandbox.
  virtual bool ended() const = 0;
  bool main_exited() const { return main_exited_; }
  int main_status() const { return main_status_; }  // a wait status
  const std::optional<std::string>& violation() const { return violation_; }
  const std::optional<std::string>& setup_error() const { return setup_error_; }

  // Sends `sig` to the program's process group (its children included).
  absl::Status Signal(int sig);
  // Ends the program and everything it started, while the sandbox, its
  // files and cgroup remain; it is reported as ended through Wait().
  virtual absl::Status KillProgram() = 0;
  // Starts the program afresh in the same sandbox once the old one has
  // ended (KillProgram and Wait for kEnded first). The new program reports
  // in through Wait().
  virtual absl::Status Respawn() = 0;
  // Kills the program now (a Worker: every process of its sandbox).
  // Idempotent.
  virtual void Kill() = 0;
  // Names the sandbox for `ps`, `pidof` and `kill`: its init's command line
  // reads "warden-sandbox LABEL" from now on (process_title.h; `label` is
  // cut to ProcessTitle::kMaxLabel bytes). A machine's process has no init
  // of its own: nothing changes (its Machine is named by its owner).
  virtual absl::Status Retitle(const std::string& label) = 0;

  // Where the sandbox's way out is served (a Worker: Worker::SetEgressGate;
  // a machine's process shares its machine's, so nothing).
  virtual void SetEgressGate(std::shared_ptr<EgressGate> gate) {}

  // True while the sandbox lives (the program may have ended).
  virtual bool SandboxAlive() const = 0;
  // The sandbox's root as seen from the host (through its init's
  // /proc/<pid>/root), valid while the sandbox lives. Resolve paths beneath
  // it only with openat2(RESOLVE_BENEATH or RESOLVE_IN_ROOT, and
  // RESOLVE_NO_MAGICLINKS ...).
  virtual std::string RootPath() const = 0;
  // The host ids the program runs as (files the supervisor writes into the
  // sandbox are given to them).
  uid_t program_host_uid() const { return program_host_uid_; }
  gid_t program_host_gid() const { return program_host_gid_; }
  // The program's pid inside the sandbox's pid namespace, once it reported
  // in (0 before, and for a Worker's program).
  pid_t sandbox_pid() const { return sandbox_pid_; }

  // Cumulative for the whole sandbox; nullopt in degraded mode.
  virtual std::optional<CgroupUsage> Usage() const = 0;
  virtual bool has_cgroup() const = 0;
  absl::Time started() const { return started_; }
  const StageTimes& stage_times() const { return stage_times_; }

  // For the keeper (docs/keeper-design.md): duplicates of every handle of
  // the sandbox and its cgroup's directories. UNIMPLEMENTED for a program
  // that does not own its sandbox.
  virtual absl::StatusOr<WorkerHandles> DuplicateHandles() const = 0;
  virtual std::vector<std::string> CgroupPaths() const = 0;

 protected:
  Program() = default;

  // Takes a pending seccomp notification from the listener: the violation,
  // by the system call's name. The offending thread stays blocked.
  void HandleViolation();
  // True once the program's own pidfd says it exited.
  bool ProgramGone() const;
  // poll() of `fds` until one is ready (> 0) or `deadline` passed (0; a
  // deadline in the past polls once: Wait(absl::InfinitePast()) is a
  // non-blocking look); -1 with setup_error_ set when poll fails.
  int PollUntil(struct pollfd* fds, int n, absl::Time deadline);

  UniqueFd stdin_, stdout_, stderr_, channel_, listener_;
  UniqueFd program_pidfd_;  // the program (sent by it just before execve)
  pid_t program_pid_ = -1;  // its host pid, also its process group
  pid_t sandbox_pid_ = 0;
  uid_t program_host_uid_ = 0;
  gid_t program_host_gid_ = 0;
  absl::Time started_;
  StageTimes stage_times_;

  bool main_exited_ = false;
  int main_status_ = 0;
  std::optional<std::string> violation_;
  std::optional<std::string> setup_error_;
};

// The pid a pidfd refers to, in the caller's pid namespace (its fdinfo).
pid_t PidOfPidfd(int pidfd);

}  // namespace warden
