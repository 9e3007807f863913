#include "sandbox/machine.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sandbox/port_dial.h"

namespace warden {

absl::StatusOr<UniqueFd> Machine::ConnectToPort(uint16_t port, absl::Time deadline) const {
  return ConnectToSandboxPort(worker_->init_pid(), init_pidfd_.get(), port, deadline);
}

// What the dispatcher records about one process for its MachineProcess to
// take. Guarded by the machine's mu_.
struct Machine::ProcessState {
  int32_t id = 0;
  UniqueFd notify;  // eventfd: something was recorded
  bool ready = false;
  UniqueFd listener, pidfd, master;
  pid_t pid = 0;  // in the machine
  std::optional<std::string> failure;
  bool exited = false;
  int status = 0;
  int64_t cpu_us = 0;
  // Its MachineProcess went before the process reported in: kill it then.
  bool kill_on_ready = false;

  void Wake() const {
    uint64_t one = 1;
    (void)!write(notify.get(), &one, sizeof(one));
  }
};

namespace {

// A spawn spec (SpawnSpec's layout) in a sealed-off memfd.
absl::StatusOr<UniqueFd> WriteSpec(const ProcessSpec& spec) {
  std::vector<std::string> argv = spec.argv;
  if (spec.in_place && argv.empty()) argv = {"in-place"};
  if (argv.empty() || argv[0].empty()) return absl::InvalidArgumentError("a process needs a program to run");
  for (const std::string& kv : spec.env) {
    if (kv.find('=') == std::string::npos || kv.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("environment entry '", kv, "' must have the form KEY=value"));
    }
  }
  for (const std::string& a : argv) {
    if (a.find('\0') != std::string::npos) return absl::InvalidArgumentError("an argument holds a NUL byte");
  }
  if (spec.cwd.empty() || spec.cwd.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("the working directory must be a path");
  }
  SpawnSpec header;
  header.argc = static_cast<uint32_t>(argv.size());
  header.envc = static_cast<uint32_t>(spec.env.size());
  const size_t slots = argv.size() + spec.env.size() + 2;
  std::string out(sizeof(header) + slots * 8, '\0');
  std::vector<uint64_t> offsets;
  auto add = [&out](const std::string& s) {
    const uint64_t at = out.size();
    out.append(s);
    out.push_back('\0');
    return at;
  };
  for (const std::string& a : argv) offsets.push_back(add(a));
  offsets.push_back(0);
  for (const std::string& e : spec.env) offsets.push_back(add(e));
  offsets.push_back(0);
  header.cwd = static_cast<uint32_t>(add(spec.cwd));
  if (out.size() > (64u << 20)) return absl::InvalidArgumentError("the command and its environment pass 64 MiB");
  memcpy(out.data(), &header, sizeof(header));
  memcpy(out.data() + sizeof(header), offsets.data(), offsets.size() * 8);
  UniqueFd fd(memfd_create("warden-spawn", MFD_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, "memfd_create");
  for (size_t done = 0; done < out.size();) {
    ssize_t n = write(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::ErrnoToStatus(errno, "writing the spawn spec");
    done += static_cast<size_t>(n);
  }
  return fd;
}

void SetNonBlocking(int fd) {
  if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

std::string DescribeSpawnFailure(int stage, int error) {
  return absl::StrCat(ChildStageName(static_cast<ChildStage>(stage)), ": ", strerror(error));
}

}  // namespace

absl::StatusOr<std::shared_ptr<Machine>> Machine::Start(Executor& executor, const SandboxSpec& spec,
                                                        SpawnOptions options) {
  options.machine = true;
  options.channel = false;
  auto machine = std::shared_ptr<Machine>(new Machine());
  machine->stop_.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!machine->stop_) return absl::ErrnoToStatus(errno, "eventfd");
  SandboxSpec sandbox = spec;
  sandbox.argv.clear();
  ASSIGN_OR_RETURN(machine->worker_, executor.Spawn(sandbox, options));
  Worker& worker = *machine->worker_;
  // The init holds the other ends; nothing is ever written to them.
  worker.CloseStdin();
  worker.CloseStdout();
  worker.CloseStderr();
  Machine* self = machine.get();
  worker.SetSpawnReportSink([self](const SpawnReport& report, std::vector<UniqueFd> fds) {
    self->OnReport(report, std::move(fds));
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (worker.stage_times().payload_ready == absl::Time()) {
    const unsigned ready = worker.Wait(deadline);
    if (worker.stage_times().payload_ready != absl::Time()) break;
    if (ready & Program::kEnded) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the machine's sandbox could not be built: ",
          worker.setup_error().value_or("its init exited")));
    }
    if (ready & Program::kTimedOut) {
      return absl::DeadlineExceededError("the machine's sandbox was not built within 30 s");
    }
  }
  machine->stage_times_ = worker.stage_times();
  machine->root_path_ = worker.RootPath();
  machine->in_place_ = options.fork_server != nullptr;
  machine->init_pidfd_.Reset(fcntl(worker.init_pidfd(), F_DUPFD_CLOEXEC, 3));
  if (!machine->init_pidfd_) return absl::ErrnoToStatus(errno, "dup");
  machine->dispatcher_ = std::thread([self] { self->Dispatch(); });
  return machine;
}

Machine::~Machine() {
  Kill();
  uint64_t one = 1;
  (void)!write(stop_.get(), &one, sizeof(one));
  if (dispatcher_.joinable()) dispatcher_.join();
  worker_.reset();  // reaps the init
}

void Machine::Kill() {
  {
    absl::MutexLock lock(&mu_);
    if (killed_) return;
    killed_ = true;
    if (lost_reason_.empty()) lost_reason_ = "the machine was stopped";
  }
  // Through our own pidfd: the dispatcher owns the Worker. SIGKILL to a pid
  // namespace's init takes every process in it.
  if (init_pidfd_) syscall(SYS_pidfd_send_signal, init_pidfd_.get(), SIGKILL, nullptr, 0);
}

absl::Status Machine::KillProcesses() {
  {
    absl::MutexLock lock(&mu_);
    if (killed_ || !lost_reason_.empty()) return absl::FailedPreconditionError("the machine is gone");
  }
  // The init's kill(-1, SIGKILL): every process of its pid namespace but itself.
  return worker_->SendCommand(kKillProgram);
}

bool Machine::Alive() const {
  {
    absl::MutexLock lock(&mu_);
    if (killed_ || !lost_reason_.empty()) return false;
  }
  struct pollfd p = {init_pidfd_.get(), POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

std::string Machine::lost_reason() const {
  absl::MutexLock lock(&mu_);
  return lost_reason_;
}

void Machine::Dispatch() {
  for (;;) {
    const unsigned ready = worker_->Wait(absl::InfiniteFuture(), false, stop_.get());
    if (ready & Program::kExtra) break;
    if (ready & Program::kEnded) {
      absl::MutexLock lock(&mu_);
      if (lost_reason_.empty()) {
        lost_reason_ = worker_->setup_error() ? *worker_->setup_error() : "the machine's init exited";
      }
      break;
    }
  }
  // Whoever still waits for a process learns that the machine is gone.
  absl::MutexLock lock(&mu_);
  for (const auto& [id, state] : processes_) {
    if (auto s = state.lock()) s->Wake();
  }
}

void Machine::OnReport(const SpawnReport& report, std::vector<UniqueFd> fds) {
  absl::MutexLock lock(&mu_);
  auto it = processes_.find(report.id);
  std::shared_ptr<ProcessState> state = it == processes_.end() ? nullptr : it->second.lock();
  if (state == nullptr) {
    // Its MachineProcess is gone: a process that reports in now is killed.
    if (report.type == SpawnReport::kReady && fds.size() >= 2) {
      syscall(SYS_pidfd_send_signal, fds[1].get(), SIGKILL, nullptr, 0);
      const pid_t host = PidOfPidfd(fds[1].get());
      if (host > 0) kill(-host, SIGKILL);
    }
    if (report.type == SpawnReport::kExited && it != processes_.end()) processes_.erase(it);
    return;
  }
  switch (report.type) {
    case SpawnReport::kReady:
      state->ready = true;
      state->pid = report.pid;
      if (fds.size() >= 1) state->listener = std::move(fds[0]);
      if (fds.size() >= 2) state->pidfd = std::move(fds[1]);
      if (fds.size() >= 3) state->master = std::move(fds[2]);
      if (state->kill_on_ready && state->pidfd) {
        const pid_t host = PidOfPidfd(state->pidfd.get());
        if (host > 0) kill(-host, SIGKILL);
      }
      break;
    case SpawnReport::kFailed:
      if (!state->failure) state->failure = DescribeSpawnFailure(report.stage, report.error);
      if (report.pid != 0) state->pid = report.pid;
      break;
    case SpawnReport::kExited:
      state->exited = true;
      state->status = report.status;
      state->cpu_us = report.cpu_us;
      processes_.erase(it);
      break;
  }
  state->Wake();
}

absl::StatusOr<std::unique_ptr<MachineProcess>> Machine::Spawn(const ProcessSpec& spec) {
  if (spec.in_place && !in_place_) {
    return absl::FailedPreconditionError("this machine was not cloned from a fork server: nothing runs in place");
  }
  auto process = std::unique_ptr<MachineProcess>(new MachineProcess(shared_from_this(), spec));
  RETURN_IF_ERROR(SendSpawn(spec, std::make_shared<ProcessState>(), process.get()));
  return process;
}

absl::Status Machine::SendSpawn(const ProcessSpec& spec, const std::shared_ptr<ProcessState>& state,
                                MachineProcess* process) {
  ASSIGN_OR_RETURN(UniqueFd spec_fd, WriteSpec(spec));
  state->notify.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!state->notify) return absl::ErrnoToStatus(errno, "eventfd");
  SpawnRequest request;
  std::vector<int> fds = {spec_fd.get()};
  std::vector<UniqueFd> child_ends;  // closed once sent: the init has its copies
  if (spec.terminal) {
    request.flags |= SpawnRequest::kTerminal;
    request.cols = spec.terminal->first;
    request.rows = spec.terminal->second;
  } else {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
    process->stdin_.Reset(in[1]);
    child_ends.emplace_back(in[0]);
    if (pipe2(out, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
    process->stdout_.Reset(out[0]);
    child_ends.emplace_back(out[1]);
    if (pipe2(err, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
    process->stderr_.Reset(err[0]);
    child_ends.emplace_back(err[1]);
    for (int fd : {in[1], out[0], err[0]}) SetNonBlocking(fd);
    for (const UniqueFd& end : child_ends) fds.push_back(end.get());
  }
  if (spec.channel) {
    int chan[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) != 0) {
      return absl::ErrnoToStatus(errno, "socketpair");
    }
    process->channel_.Reset(chan[0]);
    child_ends.emplace_back(chan[1]);
    fds.push_back(chan[1]);
    request.flags |= SpawnRequest::kChannel;
  }
  if (spec.in_place) request.flags |= SpawnRequest::kInPlace;
  if (spec.cpu_ms > 0) request.cpu_seconds = static_cast<int32_t>(std::min<int64_t>(spec.cpu_ms / 1000 + 1, 1 << 30));
  {
    absl::MutexLock lock(&mu_);
    if (killed_ || !lost_reason_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the machine is gone (", lost_reason_.empty() ? "stopped" : lost_reason_, ")"));
    }
    state->id = next_id_++;
    if (next_id_ <= 0) next_id_ = 1;
    processes_[state->id] = state;
  }
  request.id = state->id;
  process->state_ = state;
  process->started_ = absl::Now();
  if (absl::Status sent = worker_->SendSpawn(request, fds); !sent.ok()) {
    absl::MutexLock lock(&mu_);
    processes_.erase(state->id);
    return sent;
  }
  return absl::OkStatus();
}

// ---- MachineProcess ----

MachineProcess::~MachineProcess() { Kill(); }

void MachineProcess::Take() {
  if (!state_) return;
  absl::MutexLock lock(&machine_->mu_);
  Machine::ProcessState& s = *state_;
  if (s.ready && !reported_in_) {
    reported_in_ = true;
    listener_ = std::move(s.listener);
    program_pidfd_ = std::move(s.pidfd);
    if (program_pidfd_) program_pid_ = PidOfPidfd(program_pidfd_.get());
    sandbox_pid_ = s.pid;
    stage_times_.payload_ready = absl::Now();
    if (s.master) {
      master_ = std::move(s.master);
      stdout_.Reset(fcntl(master_.get(), F_DUPFD_CLOEXEC, 3));
      stdin_.Reset(fcntl(master_.get(), F_DUPFD_CLOEXEC, 3));
      SetNonBlocking(master_.get());  // one open file: all three
    }
  }
  if (s.failure && !setup_error_) {
    setup_error_ = s.failure;
    if (sandbox_pid_ == 0) sandbox_pid_ = s.pid;
  }
  if (s.exited && !main_exited_) {
    main_exited_ = true;
    main_status_ = s.status;
    cpu_us_ = s.cpu_us;
  }
}

unsigned MachineProcess::Wait(absl::Time deadline, bool want_stdin, int extra_fd) {
  for (;;) {
    const bool was_in = reported_in_;
    Take();
    const unsigned news = reported_in_ && !was_in ? kReportedIn : 0u;
    if (ended()) return kEnded | news;
    if (news != 0) return news;
    struct pollfd fds[8];
    int n = 0;
    auto add = [&](int fd, short events) -> int {
      if (fd < 0) return -1;
      fds[n] = {fd, events, 0};
      return n++;
    };
    const int i_note = add(state_ ? state_->notify.get() : -1, POLLIN);
    const int i_init = add(machine_->init_pidfd_.get(), POLLIN);
    const int i_lis = add(listener_.get(), POLLIN);
    // A stream at EOF (the process closed it, or ended) is reported once,
    // then no longer polled: nothing more can come from it.
    const int i_out = add(stdout_eof_ ? -1 : stdout_.get(), POLLIN);
    const int i_err = add(stderr_eof_ ? -1 : stderr_.get(), POLLIN);
    const int i_chan = add(channel_eof_ ? -1 : channel_.get(), POLLIN);
    const int i_in = want_stdin ? add(stdin_.get(), POLLOUT) : -1;
    const int i_extra = add(extra_fd, POLLIN);
    const int rc = PollUntil(fds, n, deadline);
    if (rc < 0) return kEnded;
    if (rc == 0) return kTimedOut;
    auto has = [&](int i, short mask) { return i >= 0 && (fds[i].revents & mask) != 0; };
    unsigned ready = 0;
    if (has(i_note, POLLIN)) {
      uint64_t count;
      (void)!read(state_->notify.get(), &count, sizeof(count));
      const bool before = reported_in_;
      Take();
      if (reported_in_ && !before) ready |= kReportedIn;
    }
    if (has(i_lis, POLLIN)) {
      HandleViolation();
      if (violation_) ready |= kViolation;
    } else if (has(i_lis, POLLHUP | POLLERR)) {
      listener_.Reset();
    }
    if (has(i_out, POLLIN | POLLHUP | POLLERR)) ready |= kStdout;
    if (has(i_err, POLLIN | POLLHUP | POLLERR)) ready |= kStderr;
    if (has(i_chan, POLLIN | POLLHUP | POLLERR)) ready |= kChannel;
    stdout_eof_ = stdout_eof_ || (has(i_out, POLLHUP | POLLERR) && !has(i_out, POLLIN));
    stderr_eof_ = stderr_eof_ || (has(i_err, POLLHUP | POLLERR) && !has(i_err, POLLIN));
    channel_eof_ = channel_eof_ || (has(i_chan, POLLHUP | POLLERR) && !has(i_chan, POLLIN));
    if (has(i_extra, POLLIN | POLLHUP | POLLERR)) ready |= kExtra;
    if (has(i_in, POLLOUT | POLLERR | POLLHUP)) ready |= kStdinWritable;
    if (has(i_init, POLLIN)) {
      Take();  // its last reports may have raced its end
      if (!main_exited_ && !setup_error_) gone_ = true;
    }
    if (ended()) ready |= kEnded;
    if (ready != 0) return ready;
  }
}

absl::Status MachineProcess::KillProgram() {
  Take();
  if (ended()) return absl::OkStatus();
  if (program_pid_ <= 0) {
    // Not reported in yet: the dispatcher kills it when it does.
    absl::MutexLock lock(&machine_->mu_);
    if (!state_->ready) {
      state_->kill_on_ready = true;
      return absl::OkStatus();
    }
  }
  Take();
  if (program_pid_ > 0 && !ProgramGone()) {
    syscall(SYS_pidfd_send_signal, program_pidfd_.get(), SIGKILL, nullptr, 0);
    kill(-program_pid_, SIGKILL);
  }
  return absl::OkStatus();
}

void MachineProcess::Kill() {
  if (!state_) return;
  (void)KillProgram();
}

absl::Status MachineProcess::Respawn() {
  Take();
  if (!machine_->Alive()) return absl::FailedPreconditionError("the machine is gone; start a new one");
  if (!ended()) return absl::FailedPreconditionError("the program is still running");
  listener_.Reset();
  program_pidfd_.Reset();
  program_pid_ = -1;
  sandbox_pid_ = 0;
  master_.Reset();
  stdin_.Reset();
  stdout_.Reset();
  stderr_.Reset();
  channel_.Reset();
  violation_.reset();
  setup_error_.reset();
  main_exited_ = false;
  main_status_ = 0;
  reported_in_ = false;
  gone_ = false;
  stdout_eof_ = stderr_eof_ = channel_eof_ = false;
  cpu_us_ = 0;
  state_ = std::make_shared<Machine::ProcessState>();
  return machine_->SendSpawn(spec_, state_, this);
}

absl::Status MachineProcess::Resize(uint16_t cols, uint16_t rows) {
  Take();
  if (!master_) return absl::FailedPreconditionError("the process has no terminal (yet)");
  struct winsize size = {rows, cols, 0, 0};
  if (ioctl(master_.get(), TIOCSWINSZ, &size) != 0) return absl::ErrnoToStatus(errno, "resize the terminal");
  return absl::OkStatus();
}

absl::StatusOr<WorkerHandles> MachineProcess::DuplicateHandles() const {
  return absl::UnimplementedError("a process of a machine is not kept across restarts");
}

}  // namespace warden
