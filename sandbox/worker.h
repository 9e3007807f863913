// Worker: one live sandbox and the program it was built for, seen from the
// supervisor (a Program).
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

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sandbox/cgroup.h"
#include "sandbox/egress_gate.h"
#include "sandbox/program.h"
#include "sandbox/recycle_pool.h"
#include "sandbox/sandbox_child.h"
#include "sandbox/unique_fd.h"

namespace warden {

class Worker final : public Program {
 public:
  // Rebuilds the Worker of a sandbox another wardend started and the
  // keeper held across that wardend's end: `handles` are the ones that
  // wardend's Worker had (DuplicateHandles), `cgroup` its group (may be
  // null), the program's host ids as they were. What the sandbox reported
  // meanwhile (its program ended, a violation) is read by Wait as usual.
  static absl::StatusOr<std::unique_ptr<Worker>> Adopt(WorkerHandles handles,
                                                       std::unique_ptr<Cgroup> cgroup,
                                                       uid_t program_host_uid, gid_t program_host_gid);
  // Duplicates of every handle (close-on-exec), for the keeper to hold.
  absl::StatusOr<WorkerHandles> DuplicateHandles() const override;
  // The cgroup's directories (empty without one), to find it again on adopt.
  std::vector<std::string> CgroupPaths() const override;

  ~Worker() override;

  unsigned Wait(absl::Time deadline, bool want_stdin = false, int extra_fd = -1) override;

  bool ended() const override { return main_exited_ || init_exited_ || setup_error_.has_value(); }

  // Kills every process of the sandbox but its init: the program ends (and
  // is reported as ended) while the sandbox, its files and cgroup remain.
  absl::Status KillProgram() override;
  // Starts the program afresh in the same sandbox (same namespaces,
  // workspace, /tmp and cgroup).
  absl::Status Respawn() override;
  // Kills every process in the sandbox now and reaps the init. Idempotent.
  void Kill() override;
  // Callable from any thread, as SendSpawn.
  absl::Status Retitle(const std::string& label) override;

  bool SandboxAlive() const override;
  std::string RootPath() const override;
  std::optional<CgroupUsage> Usage() const override;
  bool has_cgroup() const override { return cgroup_ != nullptr; }
  // Host pid of the sandbox's init (tests and diagnostics).
  pid_t init_pid() const { return init_pid_; }

  // A machine's sandbox (SpawnOptions::machine): reports about the
  // processes its init spawned go to `sink`, called on the thread in Wait
  // with the report and the fds that came with it. Set before the first
  // Wait.
  using SpawnReportSink = std::function<void(const SpawnReport&, std::vector<UniqueFd>)>;
  void SetSpawnReportSink(SpawnReportSink sink) { spawn_reports_ = std::move(sink); }
  // Sends a spawn request with its fds (not owned; duplicated into the
  // init). Callable from any thread while another Waits.
  absl::Status SendSpawn(const SpawnRequest& request, const std::vector<int>& fds) const;
  // Sends the init one command byte (sandbox_child.h, e.g. kKillProgram);
  // callable from any thread, as SendSpawn.
  absl::Status SendCommand(char command) const;
  int init_pidfd() const { return init_pidfd_.get(); }

  // Where the sandbox's egress listener is served (egress_gate.h): given to
  // `gate` now if the sandbox reported it already, else when it does; the
  // gate is closed when the sandbox ends. Executor::Spawn sets it from
  // SpawnOptions::egress; an adopted sandbox gets it here.
  void SetEgressGate(std::shared_ptr<EgressGate> gate) override;

 private:
  friend class Executor;
  Worker() = default;

  void HandleControl();
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
  UniqueFd control_;
  std::vector<std::string> mount_targets_;  // for setup error messages
  SpawnReportSink spawn_reports_;
  bool init_exited_ = false;
  std::shared_ptr<EgressGate> egress_gate_;
  UniqueFd egress_listener_;  // ours; the gate serves a copy
};

}  // namespace warden
