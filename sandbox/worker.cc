#include "sandbox/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "sandbox/fd_passing.h"
#include "sandbox/port_dial.h"
#include "sandbox/sandbox_child.h"
#include "sandbox/seccomp_policy.h"

namespace warden {

absl::StatusOr<std::unique_ptr<Worker>> Worker::Adopt(WorkerHandles handles,
                                                      std::unique_ptr<Cgroup> cgroup,
                                                      uid_t program_host_uid, gid_t program_host_gid) {
  if (!handles.init_pidfd || !handles.control) {
    return absl::InvalidArgumentError("an adopted sandbox needs its init's pidfd and control socket");
  }
  auto worker = std::unique_ptr<Worker>(new Worker());
  worker->adopted_ = true;
  worker->init_pid_ = PidOfPidfd(handles.init_pidfd.get());
  worker->init_pidfd_ = std::move(handles.init_pidfd);
  worker->control_ = std::move(handles.control);
  worker->stdin_ = std::move(handles.stdin_fd);
  worker->stdout_ = std::move(handles.stdout_fd);
  worker->stderr_ = std::move(handles.stderr_fd);
  worker->channel_ = std::move(handles.channel);
  worker->listener_ = std::move(handles.listener);
  worker->program_pidfd_ = std::move(handles.program_pidfd);
  if (worker->program_pidfd_) worker->program_pid_ = PidOfPidfd(worker->program_pidfd_.get());
  worker->cgroup_ = std::move(cgroup);
  worker->program_host_uid_ = program_host_uid;
  worker->program_host_gid_ = program_host_gid;
  worker->started_ = absl::Now();
  for (int fd : {worker->stdout_.get(), worker->stderr_.get(), worker->stdin_.get()}) {
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return worker;
}

absl::StatusOr<WorkerHandles> Worker::DuplicateHandles() const {
  WorkerHandles out;
  auto dup = [](const UniqueFd& from, UniqueFd* to) -> absl::Status {
    if (!from) return absl::OkStatus();
    to->Reset(fcntl(from.get(), F_DUPFD_CLOEXEC, 3));
    if (!*to) return absl::ErrnoToStatus(errno, "dup");
    return absl::OkStatus();
  };
  for (auto [from, to] : {std::pair{&init_pidfd_, &out.init_pidfd}, {&control_, &out.control},
                          {&stdin_, &out.stdin_fd}, {&stdout_, &out.stdout_fd},
                          {&stderr_, &out.stderr_fd}, {&channel_, &out.channel},
                          {&listener_, &out.listener}, {&program_pidfd_, &out.program_pidfd}}) {
    if (absl::Status s = dup(*from, to); !s.ok()) return s;
  }
  return out;
}

std::vector<std::string> Worker::CgroupPaths() const {
  return cgroup_ ? cgroup_->Paths() : std::vector<std::string>{};
}

Worker::~Worker() {
  Kill();
  // Every process of the sandbox is dead now (its pid namespace's init is
  // reaped); the pool checks that its cgroup agrees before reusing anything.
  if (std::shared_ptr<RecyclePool> pool = recycle_pool_.lock()) {
    absl::StatusOr<bool> empty = cgroup_ ? cgroup_->Empty() : absl::StatusOr<bool>(true);
    pool->ReturnNamespaces(std::move(namespaces_), empty.ok() && *empty);
    if (cgroup_ && cgroup_recyclable_ && empty.ok() && *empty) pool->ReturnCgroup(std::move(cgroup_));
  }
  if (cgroup_) {
    if (auto s = cgroup_->Destroy(); !s.ok()) {
      fprintf(stderr, "warden: removing cgroup: %s\n", std::string(s.message()).c_str());
    }
  }
}

unsigned Worker::Wait(absl::Time deadline, bool want_stdin, int extra_fd) {
  for (;;) {
    if (ended()) return kEnded;
    struct pollfd fds[8];
    int n = 0;
    auto add = [&](int fd, short events) -> int {
      if (fd < 0) return -1;
      fds[n] = {fd, events, 0};
      return n++;
    };
    const int i_ctl = add(control_.get(), POLLIN);
    const int i_pid = add(init_pidfd_.get(), POLLIN);
    const int i_lis = add(listener_.get(), POLLIN);
    const int i_out = add(stdout_.get(), POLLIN);
    const int i_err = add(stderr_.get(), POLLIN);
    const int i_chan = add(channel_.get(), POLLIN);
    const int i_in = want_stdin ? add(stdin_.get(), POLLOUT) : -1;
    const int i_extra = add(extra_fd, POLLIN);

    const int rc = PollUntil(fds, n, deadline);
    if (rc < 0) return kEnded;
    if (rc == 0) return kTimedOut;
    auto has = [&](int i, short mask) { return i >= 0 && (fds[i].revents & mask) != 0; };

    unsigned ready = 0;
    if (has(i_ctl, POLLIN | POLLHUP | POLLERR)) {
      const absl::Time before = stage_times_.payload_ready;
      HandleControl();
      if (stage_times_.payload_ready != before) ready |= kReportedIn;
    }
    if (has(i_lis, POLLIN)) {
      HandleViolation();
      if (violation_) ready |= kViolation;
    } else if (has(i_lis, POLLHUP | POLLERR)) {
      listener_.Reset();  // every process under the filter is gone
    }
    if (has(i_out, POLLIN | POLLHUP | POLLERR)) ready |= kStdout;
    if (has(i_err, POLLIN | POLLHUP | POLLERR)) ready |= kStderr;
    if (has(i_chan, POLLIN | POLLHUP | POLLERR)) ready |= kChannel;
    if (has(i_extra, POLLIN | POLLHUP | POLLERR)) ready |= kExtra;
    if (has(i_in, POLLOUT | POLLERR | POLLHUP)) ready |= kStdinWritable;
    if (has(i_pid, POLLIN)) {
      // The init is gone; its last report may have raced its exit.
      HandleControl();
      if (!main_exited_ && !setup_error_) init_exited_ = true;
    }
    if (ended()) ready |= kEnded;
    if (ready != 0) return ready;
  }
}

void Worker::HandleControl() {
  // A ControlMessage, or (from a machine's init) a SpawnReport.
  alignas(8) char buffer[std::max(sizeof(ControlMessage), sizeof(SpawnReport))];
  for (;;) {
    if (!control_) return;
    int fds[kMaxPassedFds];
    int n_fds = 0;
    const ssize_t n = ReceiveWithFds(control_.get(), buffer, sizeof(buffer), MSG_DONTWAIT, fds, &n_fds);
    if (n <= 0) return;  // nothing more now, or the init is gone (EOF)
    std::vector<UniqueFd> passed;
    for (int i = 0; i < n_fds; ++i) passed.emplace_back(fds[i]);
    if (n == static_cast<ssize_t>(sizeof(SpawnReport))) {
      SpawnReport report;
      memcpy(&report, buffer, sizeof(report));
      if (spawn_reports_ && report.type >= SpawnReport::kReady) spawn_reports_(report, std::move(passed));
      continue;
    }
    if (n != static_cast<ssize_t>(sizeof(ControlMessage))) continue;
    ControlMessage msg;
    memcpy(&msg, buffer, sizeof(msg));
    switch (msg.type) {
      case ControlMessage::kPayloadReady:
        stage_times_.payload_ready = absl::Now();
        if (passed.size() >= 1) listener_ = std::move(passed[0]);
        if (passed.size() >= 2) program_pidfd_ = std::move(passed[1]);
        if (program_pidfd_) program_pid_ = PidOfPidfd(program_pidfd_.get());
        break;
      case ControlMessage::kSetupFailed:
        setup_error_ = DescribeFailure(msg.stage, msg.error, msg.op_index);
        break;
      case ControlMessage::kMainExited:
        main_exited_ = true;
        main_status_ = msg.value;
        break;
      case ControlMessage::kEgressListener:
        if (!passed.empty() && !egress_listener_) {
          egress_listener_ = std::move(passed[0]);
          SetEgressGate(egress_gate_);
        }
        break;
    }
  }
}

absl::Status Worker::SendSpawn(const SpawnRequest& request, const std::vector<int>& fds) const {
  if (!control_) return absl::FailedPreconditionError("the sandbox is gone");
  if (SendWithFds(control_.get(), &request, sizeof(request), nullptr, 0, fds.data(),
                  static_cast<int>(fds.size())) < 0) {
    return absl::ErrnoToStatus(errno, "sending a spawn request to the sandbox");
  }
  return absl::OkStatus();
}

absl::Status Worker::Retitle(const std::string& label) {
  if (!control_) return absl::FailedPreconditionError("the sandbox is gone");
  RetitleRequest request;
  memcpy(request.label, label.data(), std::min(label.size(), sizeof(request.label) - 1));
  if (write(control_.get(), &request, sizeof(request)) != static_cast<ssize_t>(sizeof(request))) {
    return absl::ErrnoToStatus(errno, "writing to the sandbox's init");
  }
  return absl::OkStatus();
}

absl::Status Worker::SendCommand(char command) const {
  if (!control_) return absl::FailedPreconditionError("the sandbox is gone");
  if (write(control_.get(), &command, 1) != 1) return absl::ErrnoToStatus(errno, "writing to the sandbox's init");
  return absl::OkStatus();
}

std::string Worker::DescribeFailure(int stage, int error, int op_index) const {
  std::string where = ChildStageName(static_cast<ChildStage>(stage));
  if (op_index >= 0 && op_index < static_cast<int>(mount_targets_.size())) {
    absl::StrAppend(&where, " (at ", mount_targets_[op_index], ")");
  }
  return absl::StrCat(where, ": ", strerror(error));
}

absl::Status Worker::KillProgram() {
  if (reaped_ || !control_) return absl::FailedPreconditionError("the sandbox is gone");
  if (write(control_.get(), &kKillProgram, 1) != 1) return absl::ErrnoToStatus(errno, "kill program");
  return absl::OkStatus();
}

absl::Status Worker::Respawn() {
  if (reaped_ || init_exited_ || setup_error_ || !control_) {
    return absl::FailedPreconditionError("the sandbox is gone; start a new one");
  }
  if (!main_exited_) return absl::FailedPreconditionError("the program is still running");
  if (write(control_.get(), &kRespawn, 1) != 1) return absl::ErrnoToStatus(errno, "respawn");
  listener_.Reset();
  program_pidfd_.Reset();
  program_pid_ = -1;
  violation_.reset();
  main_exited_ = false;
  main_status_ = 0;
  return absl::OkStatus();
}

bool Worker::SandboxAlive() const {
  if (reaped_ || init_exited_ || !init_pidfd_) return false;
  struct pollfd p = {init_pidfd_.get(), POLLIN, 0};
  return poll(&p, 1, 0) == 0;  // a pidfd turns readable when the process exits
}

std::string Worker::RootPath() const { return absl::StrCat("/proc/", init_pid_, "/root"); }

void Worker::Kill() {
  if (reaped_ || !init_pidfd_) return;
  // SIGKILL to a pid namespace's init kills every process in it; the reap
  // returns only after the kernel has torn all of them down.
  syscall(SYS_pidfd_send_signal, init_pidfd_.get(), SIGKILL, nullptr, 0);
  siginfo_t info;
  while (waitid(static_cast<idtype_t>(P_PIDFD), init_pidfd_.get(), &info, WEXITED) != 0 &&
         errno == EINTR) {
  }
  if (adopted_) {
    // Not our child (the keeper reaps it): wait for it to have exited.
    struct pollfd p = {init_pidfd_.get(), POLLIN, 0};
    while (poll(&p, 1, 10'000) < 0 && errno == EINTR) {
    }
  }
  reaped_ = true;
  init_exited_ = true;
  // Its way out closes with it, before its namespaces can serve another.
  if (egress_gate_) egress_gate_->Close();
  egress_listener_.Reset();
}

void Worker::SetEgressGate(std::shared_ptr<EgressGate> gate) {
  // Another gate took the sandbox over (a hibernated session reopened with
  // a warm pool's sandbox): the old one stops serving it.
  if (egress_gate_ && egress_gate_ != gate) egress_gate_->Close();
  egress_gate_ = std::move(gate);
  if (!egress_gate_ || reaped_) return;
  if (!egress_listener_ && adopted_) {
    // A sandbox a predecessor started: its listener went with that wardend
    // (the keeper holds no copy), so a new one is opened in its namespace.
    // If something inside took the port meanwhile, the sandbox has no way
    // out (it only hurt itself); the log says so.
    absl::StatusOr<UniqueFd> listener = ListenInSandbox(init_pid_, init_pidfd_.get(), kEgressPort);
    if (!listener.ok()) {
      fprintf(stderr, "warden: an adopted sandbox gets no egress listener: %s\n",
              std::string(listener.status().message()).c_str());
      return;
    }
    egress_listener_ = *std::move(listener);
  }
  if (!egress_listener_) return;
  UniqueFd copy(fcntl(egress_listener_.get(), F_DUPFD_CLOEXEC, 3));
  if (copy) egress_gate_->Open(std::move(copy));
}

std::optional<CgroupUsage> Worker::Usage() const {
  if (!cgroup_) return std::nullopt;
  auto usage = cgroup_->Usage();
  if (!usage.ok()) return std::nullopt;
  return *usage;
}

}  // namespace warden
