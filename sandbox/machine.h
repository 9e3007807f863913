// Machine: one sandbox holding many processes - what `docker exec` is to a
// container, and what an E2B sandbox is.
//
// A machine is one sandbox (one user, pid, mount, network, IPC, UTS and
// cgroup namespace, one cgroup with the limits of all its processes
// together) whose init runs no program of its own: it starts processes on
// request (Spawn), each through the whole containment sequence of a
// sandbox's program - its own session and process group, rlimits, no
// capabilities, the sandbox's user, no_new_privs, a seccomp filter with a
// listener of its own - at the cost of a fork and an execve inside the
// running sandbox: the init borrows its own page tables for the child until
// its execve (CLONE_VM | CLONE_VFORK), so that cost does not grow with the
// init's memory. The processes share the machine's /tmp, workspace and
// process table: one can see and signal another, as on any Linux machine.
//
// The init reports each process's start and end over its control socket; a
// thread of the machine's own reads them and hands each to its
// MachineProcess. Spawn may be called from any thread; each MachineProcess
// is used by one thread at a time. Destroying the Machine (or Kill) ends
// every process in it at once.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "sandbox/program.h"
#include "sandbox/sandbox.h"
#include "sandbox/worker.h"

namespace warden {

class MachineProcess;

struct ProcessSpec {
  // argv[0]: the program, a path (absolute, or relative to cwd) or a name
  // looked up in the PATH of `env`. Ignored with `in_place`.
  std::vector<std::string> argv;
  std::vector<std::string> env;  // the whole environment, "KEY=value"
  std::string cwd = "/";
  bool channel = false;  // a socket at fd 3 (Program::channel_fd())
  // Run the fork server's program in place (the machine was cloned from a
  // fork server: its warm interpreter) instead of execve of argv.
  bool in_place = false;
  // A terminal of this size (columns, rows) in the sandbox's devpts as the
  // process's stdin, stdout, stderr and controlling terminal: stdout_fd()
  // reads and stdin_fd() writes its master; there is no stderr_fd().
  std::optional<std::pair<uint16_t, uint16_t>> terminal;
  // RLIMIT_CPU of the process (seconds, rounded up); 0: the sandbox's.
  int64_t cpu_ms = 0;
};

class Machine : public std::enable_shared_from_this<Machine> {
 public:
  // Builds the sandbox of `spec` (argv ignored) and waits until it is
  // ready. With options.fork_server the init is cloned from the fork
  // server, so processes can run its program in place.
  static absl::StatusOr<std::shared_ptr<Machine>> Start(Executor& executor, const SandboxSpec& spec,
                                                        SpawnOptions options);
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // Starts a process. It reports in, or fails to, through its Wait(); its
  // pid in the machine is sandbox_pid() once it has. FAILED_PRECONDITION
  // once the machine is gone.
  absl::StatusOr<std::unique_ptr<MachineProcess>> Spawn(const ProcessSpec& spec);

  // Ends every process and the sandbox now. Idempotent.
  void Kill();
  // Names the machine's sandbox for `ps` (Program::Retitle); any thread.
  absl::Status Retitle(const std::string& label) { return worker_->Retitle(label); }
  // Ends every process but the init, which goes on taking spawns: a reboot
  // that keeps the files (E2B's filesystem-only pause). Each process's
  // MachineProcess sees its end as a kill.
  absl::Status KillProcesses();
  // False once the sandbox is gone (killed, or its init died).
  bool Alive() const;
  // Why it is gone, if it is.
  std::string lost_reason() const;

  std::string RootPath() const { return root_path_; }
  // A connection to `port` on the machine's loopback (port_dial.h).
  absl::StatusOr<UniqueFd> ConnectToPort(uint16_t port, absl::Time deadline) const;
  uid_t program_host_uid() const { return worker_->program_host_uid(); }
  gid_t program_host_gid() const { return worker_->program_host_gid(); }
  std::optional<CgroupUsage> Usage() const { return worker_->Usage(); }
  bool has_cgroup() const { return worker_->has_cgroup(); }
  bool can_run_in_place() const { return in_place_; }
  const Program::StageTimes& stage_times() const { return stage_times_; }

  // What the dispatcher and a MachineProcess share about one process.
  struct ProcessState;

 private:
  friend class MachineProcess;
  Machine() = default;
  void Dispatch();  // the thread reading the init's reports
  void OnReport(const SpawnReport& report, std::vector<UniqueFd> fds);
  // Sends the spawn request of `state`'s process (new pipes from `spec`).
  absl::Status SendSpawn(const ProcessSpec& spec, const std::shared_ptr<ProcessState>& state,
                         MachineProcess* process);

  std::unique_ptr<Worker> worker_;  // Waited on by the dispatcher only
  std::string root_path_;
  bool in_place_ = false;
  Program::StageTimes stage_times_;
  UniqueFd stop_;  // eventfd: the dispatcher's wake-up to stop
  UniqueFd init_pidfd_;  // a duplicate, polled by the processes
  std::thread dispatcher_;

  mutable absl::Mutex mu_;
  std::map<int32_t, std::weak_ptr<ProcessState>> processes_ ABSL_GUARDED_BY(mu_);
  int32_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool killed_ ABSL_GUARDED_BY(mu_) = false;
  std::string lost_reason_ ABSL_GUARDED_BY(mu_);
};

// One process in a machine (Machine::Spawn), a Program. KillProgram and
// Kill end its process group (what it left running in other groups
// survives, as on any machine); Respawn starts it again from its spec.
// Destroying it kills its process group.
class MachineProcess final : public Program {
 public:
  ~MachineProcess() override;

  unsigned Wait(absl::Time deadline, bool want_stdin = false, int extra_fd = -1) override;
  bool ended() const override { return main_exited_ || gone_ || setup_error_.has_value(); }
  absl::Status KillProgram() override;
  absl::Status Respawn() override;
  void Kill() override;
  absl::Status Retitle(const std::string&) override { return absl::OkStatus(); }
  bool SandboxAlive() const override { return machine_->Alive(); }
  std::string RootPath() const override { return machine_->RootPath(); }
  std::optional<CgroupUsage> Usage() const override { return machine_->Usage(); }
  bool has_cgroup() const override { return machine_->has_cgroup(); }
  absl::StatusOr<WorkerHandles> DuplicateHandles() const override;
  std::vector<std::string> CgroupPaths() const override { return {}; }

  // CPU time of the process and its waited-for children, once it ended.
  int64_t cpu_us() const { return cpu_us_; }
  // A terminal's new size (SIGWINCH to its foreground group).
  absl::Status Resize(uint16_t cols, uint16_t rows);
  bool terminal() const { return spec_.terminal.has_value(); }
  const ProcessSpec& spec() const { return spec_; }

 private:
  friend class Machine;
  MachineProcess(std::shared_ptr<Machine> machine, ProcessSpec spec)
      : machine_(std::move(machine)), spec_(std::move(spec)) {
    // Every process of a machine runs as its one user.
    program_host_uid_ = machine_->program_host_uid();
    program_host_gid_ = machine_->program_host_gid();
  }
  // Takes what the dispatcher recorded for the process.
  void Take();

  std::shared_ptr<Machine> machine_;
  const ProcessSpec spec_;
  std::shared_ptr<Machine::ProcessState> state_;
  UniqueFd master_;  // a terminal's master; stdin_ and stdout_ are duplicates
  bool reported_in_ = false;
  bool gone_ = false;  // the machine died before the process ended
  bool stdout_eof_ = false, stderr_eof_ = false, channel_eof_ = false;
  int64_t cpu_us_ = 0;
};

}  // namespace warden
