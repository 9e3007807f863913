#include "kernel/session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kernel/workspace.h"
#include "kernel/zygote.h"
#include "sandbox/port_dial.h"
#include "sandbox/worker.h"

#ifndef WARDEN_KERNELS_DIR
#define WARDEN_KERNELS_DIR "/usr/lib/warden/kernels"
#endif

namespace warden {
namespace {

// Reads what is available on a non-blocking fd into `out`, calling `sink`
// for each chunk; returns false at EOF or on an error.
template <typename Sink>
bool ReadAvailable(int fd, Sink&& sink) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      sink(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
}

absl::Status WriteAll(int fd, const std::string& data, absl::Time deadline) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return absl::ErrnoToStatus(errno, "writing to the kernel");
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) return absl::DeadlineExceededError("the kernel is not reading its channel");
    struct pollfd p = {fd, POLLOUT, 0};
    poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
  }
  return absl::OkStatus();
}

std::string DescribeExit(const Program& worker) {
  if (worker.setup_error()) return *worker.setup_error();
  if (!worker.main_exited()) return "its sandbox died";
  const int status = worker.main_status();
  if (WIFEXITED(status)) return absl::StrCat("it exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("it was killed by signal ", WTERMSIG(status));
  return "it ended";
}

}  // namespace

Limits SessionOptions::DefaultSessionLimits() {
  Limits limits;
  limits.cpu_ms = 3'600'000;  // the session's total budget; cells have their own
  limits.wall_ms = 86'400'000;
  return limits;
}

std::string SessionOptions::DefaultKernelsDir() { return WARDEN_KERNELS_DIR; }

Session::Session(Executor& executor, const SessionOptions& options)
    : executor_(executor), options_(options), egress_gate_(options.egress ? options.egress() : nullptr) {
  wake_.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
}

Session::~Session() = default;

absl::StatusOr<std::unique_ptr<Session>> Session::Start(Executor& executor,
                                                         const SessionOptions& options) {
  auto session = std::unique_ptr<Session>(new Session(executor, options));
  if (!session->wake_) return absl::ErrnoToStatus(errno, "eventfd");
  RETURN_IF_ERROR(session->StartWorker(/*fresh_sandbox=*/true));
  return session;
}

pid_t Session::kernel_pid() const {
  absl::MutexLock lock(&mu_);
  return worker_ ? worker_->sandbox_pid() : 0;
}

absl::StatusOr<UniqueFd> Session::ConnectToPort(uint16_t port, absl::Time deadline) const {
  if (options_.machine) return options_.machine->ConnectToPort(port, deadline);
  pid_t init = -1;
  UniqueFd pidfd;
  {
    absl::MutexLock lock(&mu_);
    const auto* worker = dynamic_cast<const Worker*>(worker_.get());
    if (worker == nullptr) return absl::FailedPreconditionError("the session has no sandbox now");
    init = worker->init_pid();
    pidfd.Reset(fcntl(worker->init_pidfd(), F_DUPFD_CLOEXEC, 3));
  }
  if (!pidfd) return absl::FailedPreconditionError("the session's sandbox is gone");
  return ConnectToSandboxPort(init, pidfd.get(), port, deadline);
}

absl::StatusOr<WorkerHandles> Session::DuplicateHandles() const {
  absl::MutexLock lock(&mu_);
  if (!worker_) return absl::FailedPreconditionError("the session has no sandbox");
  return worker_->DuplicateHandles();
}

Session::Handover Session::Describe() const {
  absl::MutexLock lock(&mu_);
  Handover snapshot;
  snapshot.execution_count = execution_count_;
  snapshot.next_cell_id = next_cell_id_;
  snapshot.version = info_.version;
  if (worker_) {
    snapshot.cgroup_paths = worker_->CgroupPaths();
    snapshot.program_host_uid = worker_->program_host_uid();
    snapshot.program_host_gid = worker_->program_host_gid();
  }
  return snapshot;
}

absl::StatusOr<std::unique_ptr<Session>> Session::Adopt(Executor& executor,
                                                         const SessionOptions& options,
                                                         std::unique_ptr<Worker> worker,
                                                         const Handover& snapshot) {
  auto session = std::unique_ptr<Session>(new Session(executor, options));
  if (!session->wake_) return absl::ErrnoToStatus(errno, "eventfd");
  absl::MutexLock lock(&session->mu_);
  session->worker_ = std::move(worker);
  session->worker_->SetEgressGate(session->egress_gate_);
  fcntl(session->worker_->channel_fd(), F_SETFL, O_NONBLOCK);
  session->execution_count_ = snapshot.execution_count;
  session->next_cell_id_ = snapshot.next_cell_id;
  session->info_.language = LanguageName(options.language);
  session->info_.version = snapshot.version;
  session->info_.warm = options.warm;
  session->start_times_ = {session->worker_->stage_times(), absl::Now()};
  session->channel_.Feed(snapshot.pending_channel.data(), snapshot.pending_channel.size());
  session->pending_stdout_ = snapshot.pending_stdout;
  session->pending_stderr_ = snapshot.pending_stderr;
  if (snapshot.busy) session->resume_cell_ = snapshot.next_cell_id - 1;
  return session;
}

absl::Status Session::StartWorker(bool fresh_sandbox) {
  absl::MutexLock lock(&mu_);
  if (options_.machine && (fresh_sandbox || !worker_)) {
    // One more process of the running machine.
    ProcessSpec spec;
    const SandboxTemplate* t = options_.sandbox_template.get();
    const bool in_place = options_.language == Language::kPython && options_.machine->can_run_in_place();
    if (t != nullptr && !in_place) {
      const std::string why = t->Unavailable(options_.language);
      if (!why.empty()) return absl::FailedPreconditionError(why);
      spec.argv = TemplateKernelArgv(options_.language, t->interpreters.at(options_.language),
                                     KernelMountPoint(options_.language, /*machine=*/true));
    } else {
      spec.argv = KernelArgv(options_.language, KernelMountPoint(options_.language, /*machine=*/true));
    }
    spec.in_place = in_place;
    spec.env = t != nullptr ? TemplateKernelEnvironment(*t, PythonKernelEnvironment()) : PythonKernelEnvironment();
    if (t != nullptr && t->interpreters.count(Language::kPython)) {
      spec.env.push_back("WARDEN_PYTHON=" + t->interpreters.at(Language::kPython));
    }
    if (!options_.warm.empty()) spec.env.push_back("WARDEN_WARM=" + absl::StrJoin(options_.warm, ","));
    if (!options_.wheelhouse.empty()) spec.env.push_back(absl::StrCat("PIP_FIND_LINKS=", kWheelhouseMountPoint));
    spec.env = MergeEnvironment(spec.env, options_.env);
    spec.cwd = options_.cwd.empty() ? options_.workspace : options_.cwd;
    spec.channel = true;
    worker_.reset();  // the old kernel, if any, dies first
    ASSIGN_OR_RETURN(worker_, options_.machine->Spawn(spec));
    fcntl(worker_->channel_fd(), F_SETFL, O_NONBLOCK);
  } else if (fresh_sandbox || !worker_) {
    SandboxSpec spec;
    spec.name = name_.empty() ? LanguageName(options_.language) : name_;
    const SandboxTemplate* t = options_.sandbox_template.get();
    if (t != nullptr) {
      // The template's root and the image's own interpreter; Warden's
      // kernel is bound in read-only, as for the host's runtime.
      const std::string why = t->Unavailable(options_.language);
      if (!why.empty()) return absl::FailedPreconditionError(why);
      spec.argv = TemplateKernelArgv(options_.language, t->interpreters.at(options_.language), kKernelMountPoint);
      spec.env = MergeEnvironment(TemplateKernelEnvironment(*t, PythonKernelEnvironment()), options_.env);
      if (t->interpreters.count(Language::kPython)) {
        spec.env.push_back("WARDEN_PYTHON=" + t->interpreters.at(Language::kPython));
      }
      spec.filesystem.root = t->root;
      spec.filesystem.passwd_base = t->passwd;
      spec.filesystem.group_base = t->group;
    } else {
      spec.argv = KernelArgv(options_.language, kKernelMountPoint);
      spec.env = MergeEnvironment(PythonKernelEnvironment(), options_.env);  // what the other kernels need too
    }
    if (!options_.warm.empty()) spec.env.push_back("WARDEN_WARM=" + absl::StrJoin(options_.warm, ","));
    if (!options_.cwd.empty()) spec.cwd = options_.cwd;
    spec.limits = options_.limits;
    spec.filesystem.binds = options_.binds;
    spec.filesystem.binds.push_back(
        {absl::StrCat(options_.kernels_dir, "/", KernelSubdirectory(options_.language)),
         kKernelMountPoint, false});
    spec.filesystem.binds.push_back(
        {absl::StrCat(options_.kernels_dir, "/", kToolsSubdirectory), kToolsMountPoint, false});
    if (!options_.wheelhouse.empty()) {
      spec.filesystem.binds.push_back({options_.wheelhouse, kWheelhouseMountPoint, false});
      spec.env.push_back(absl::StrCat("PIP_FIND_LINKS=", kWheelhouseMountPoint));
    }
    spec.filesystem.ca_bundle_source = options_.ca_bundle;
    worker_.reset();  // the old sandbox, if any, dies first
    ForkServer* fork_server =
        options_.language == Language::kPython ? options_.fork_server : nullptr;
    SpawnOptions spawn{.channel = true, .fork_server = fork_server, .egress = egress_gate_};
    auto spawned = executor_.Spawn(spec, spawn);
    if (fork_server != nullptr && absl::IsUnavailable(spawned.status())) {
      // The zygote is gone: the interpreter starts anew, in the same kind of sandbox.
      spawn.fork_server = nullptr;
      spawned = executor_.Spawn(spec, spawn);
    }
    if (!spawned.ok()) return spawned.status();
    worker_ = *std::move(spawned);
    fcntl(worker_->channel_fd(), F_SETFL, O_NONBLOCK);
  } else {
    // In place: the old kernel must be gone before the new one speaks, so
    // that nothing it wrote can be mistaken for the new kernel's words.
    if (!worker_->ended()) {
      RETURN_IF_ERROR(worker_->KillProgram());
      const absl::Time deadline = absl::Now() + absl::Seconds(5);
      while (!worker_->ended() && !(worker_->Wait(deadline) & Program::kTimedOut)) {
        ReadAvailable(worker_->stdout_fd(), [](const char*, size_t) {});
        ReadAvailable(worker_->stderr_fd(), [](const char*, size_t) {});
        ReadAvailable(worker_->channel_fd(), [](const char*, size_t) {});
      }
      if (!worker_->main_exited()) return absl::InternalError("the old kernel did not stop");
    }
    for (int fd : {worker_->stdout_fd(), worker_->stderr_fd(), worker_->channel_fd()}) {
      ReadAvailable(fd, [](const char*, size_t) {});
    }
    RETURN_IF_ERROR(worker_->Respawn());
    if (worker_->channel_fd() >= 0) fcntl(worker_->channel_fd(), F_SETFL, O_NONBLOCK);
  }
  channel_.Reset();
  RETURN_IF_ERROR(AwaitReady());
  start_times_ = {worker_->stage_times(), absl::Now()};
  return absl::OkStatus();
}

void Session::SetName(const std::string& name) {
  absl::MutexLock lock(&mu_);
  name_ = name;
  // Best effort: a sandbox that is gone has no name to show.
  if (worker_) (void)worker_->Retitle(name_);
}

Session::StartTimes Session::start_times() const {
  absl::MutexLock lock(&mu_);
  return start_times_;
}

// Waits for the kernel's ready message; what it prints meanwhile is kept
// only to explain a failure.
absl::Status Session::AwaitReady() {
  Program& worker = *worker_;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(options_.start_timeout_ms);
  std::string diagnostics;
  auto keep = [&diagnostics](const char* data, size_t n) {
    if (diagnostics.size() < 4096) diagnostics.append(data, std::min<size_t>(n, 4096));
  };
  for (;;) {
    const unsigned ready = worker.Wait(deadline);
    if (ready & Program::kStdout) ReadAvailable(worker.stdout_fd(), keep);
    if (ready & Program::kStderr) ReadAvailable(worker.stderr_fd(), keep);
    if (ready & Program::kChannel) {
      ReadAvailable(worker.channel_fd(), [this](const char* d, size_t n) { channel_.Feed(d, n); });
      auto message = channel_.Next();
      if (!message.ok()) return message.status();
      if (*message) {
        if ((*message)->type != KernelMessage::Type::kReady) {
          return absl::InternalError("the kernel spoke before it was ready");
        }
        info_ = (*message)->info;
        return absl::OkStatus();
      }
    }
    if (ready & (Program::kEnded | Program::kViolation)) {
      ReadAvailable(worker.stderr_fd(), keep);
      std::string why = worker.violation() ? "it made a forbidden system call: " + *worker.violation()
                                           : DescribeExit(worker);
      return absl::FailedPreconditionError(absl::StrCat(
          "the ", LanguageName(options_.language), " kernel failed to start: ", why,
          diagnostics.empty() ? "" : "; it said: ", diagnostics));
    }
    if (ready & Program::kTimedOut) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the ", LanguageName(options_.language), " kernel was not ready within ",
          options_.start_timeout_ms, " ms", diagnostics.empty() ? "" : "; it said: ", diagnostics));
    }
  }
}

void Session::MarkLost(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (!lost_) lost_ = reason;
  // The kernel goes; the sandbox (its workspace) stays until restart or close.
  if (worker_ && !worker_->ended()) (void)worker_->KillProgram();
}

bool Session::Alive() {
  absl::MutexLock lock(&mu_);
  if (lost_ || !worker_) return false;
  if (busy_) return true;  // the running cell will tell
  worker_->Wait(absl::InfinitePast());  // take in whatever the sandbox reported
  if (worker_->ended()) {
    lost_ = "the kernel died while idle";
    return false;
  }
  return true;
}

bool Session::lost() const {
  absl::MutexLock lock(&mu_);
  return lost_.has_value();
}

std::string Session::lost_reason() const {
  absl::MutexLock lock(&mu_);
  return lost_.value_or("");
}

int Session::execution_count() const {
  absl::MutexLock lock(&mu_);
  return execution_count_;
}

std::optional<CgroupUsage> Session::Usage() const {
  absl::MutexLock lock(&mu_);
  return worker_ ? worker_->Usage() : std::nullopt;
}

absl::Status Session::Interrupt() {
  absl::MutexLock lock(&mu_);
  if (!busy_ || !worker_) return absl::OkStatus();
  // The running Execute() wakes up and signals the kernel (and keeps doing
  // so until the cell ends).
  interrupt_requested_ = true;
  uint64_t one = 1;
  if (write(wake_.get(), &one, sizeof(one)) != sizeof(one)) {
    return absl::ErrnoToStatus(errno, "waking the session");
  }
  return absl::OkStatus();
}

CellResult Session::Execute(const std::string& code, const CellLimits& limits,
                            const EventCallback& on_event, const std::atomic<bool>* cancelled,
                            const std::vector<std::string>& env) {
  return RunCell(code, limits, on_event, cancelled, std::nullopt, env);
}

std::optional<CellResult> Session::ResumeCell(const CellLimits& limits) {
  std::optional<int> id;
  {
    absl::MutexLock lock(&mu_);
    id = std::exchange(resume_cell_, std::nullopt);
  }
  if (!id) return std::nullopt;
  return RunCell("", limits, nullptr, nullptr, id);
}

CellResult Session::RunCell(const std::string& code, const CellLimits& limits,
                            const EventCallback& on_event, const std::atomic<bool>* cancelled,
                            std::optional<int> resume, const std::vector<std::string>& env) {
  CellResult r;
  Program* worker = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (lost_) {
      r.outcome = Outcome::kSessionLost;
      r.message = *lost_;
      r.execution_count = execution_count_;
      return r;
    }
    if (busy_) {
      r.outcome = Outcome::kInternal;
      r.message = "another cell is running in this session";
      return r;
    }
    if (cancelled != nullptr && cancelled->load()) {
      // Read after taking the lock that Interrupt() takes: a cancel that
      // comes later finds the cell busy and interrupts it.
      r.outcome = Outcome::kInterrupted;
      r.message = "cancelled before it started";
      r.execution_count = execution_count_;
      return r;
    }
    busy_ = true;
    interrupt_requested_ = false;
    worker = worker_.get();
  }
  auto emit = [&on_event](CellEvent event) {
    if (on_event) on_event(event);
  };

  const int id = resume ? *resume : next_cell_id_++;
  const CgroupUsage before = worker->Usage().value_or(CgroupUsage{});
  const absl::Time start = absl::Now();
  const absl::Time wall_deadline = start + absl::Milliseconds(limits.wall_ms);
  const int64_t cpu_limit_ns = limits.cpu_ms * 1'000'000;
  const int64_t cpu_percent = std::max<int64_t>(options_.limits.cpu_percent, 1);
  absl::Time next_cpu_check = start;
  absl::Time grace_deadline = absl::InfiniteFuture();
  std::optional<Outcome> stop;  // a limit we enforced: WALL/CPU_TIMEOUT, OUTPUT_LIMIT
  std::string stop_message;
  bool done = false;
  std::optional<std::string> lost;
  std::string status;

  // An interrupt can arrive before the kernel has begun the cell, when it
  // still ignores SIGINT (it is idle): so, until the cell is done, the
  // signal is repeated every kResignal. Kernels ignore SIGINT outside user
  // code, so the repeats are harmless.
  constexpr absl::Duration kResignal = absl::Milliseconds(50);
  absl::Time next_signal = absl::InfiniteFuture();
  auto interrupt_now = [&] {
    (void)worker->Signal(SIGINT);
    next_signal = absl::Now() + kResignal;
    if (grace_deadline == absl::InfiniteFuture()) {
      grace_deadline = absl::Now() + absl::Milliseconds(options_.interrupt_grace_ms);
    }
  };
  auto stop_cell = [&](Outcome why, std::string message) {
    if (stop) return;
    stop = why;
    stop_message = std::move(message);
    interrupt_now();
  };
  auto capture = [&](std::string& into, bool& truncated, CellEvent::Kind kind) {
    return [&, kind](const char* data, size_t n) {
      const int64_t room = limits.output_bytes - static_cast<int64_t>(into.size());
      const size_t keep = static_cast<size_t>(std::clamp<int64_t>(room, 0, static_cast<int64_t>(n)));
      if (keep > 0) {
        into.append(data, keep);
        CellEvent event{kind};
        event.text.assign(data, keep);
        emit(std::move(event));
      }
      if (keep < n) {
        truncated = true;  // the rest is read and dropped: memory stays bounded
        stop_cell(Outcome::kOutputLimit, "the cell's output passed its cap");
      }
    };
  };
  auto out_sink = capture(r.stdout_data, r.stdout_truncated, CellEvent::Kind::kStdout);
  auto err_sink = capture(r.stderr_data, r.stderr_truncated, CellEvent::Kind::kStderr);

  if (resume) {
    // The predecessor sent it; what it wrote while no one read comes first.
    out_sink(pending_stdout_.data(), pending_stdout_.size());
    err_sink(pending_stderr_.data(), pending_stderr_.size());
  } else if (auto s = WriteAll(worker->channel_fd(), KernelChannel::EncodeExecute(id, code, env), wall_deadline);
             !s.ok()) {
    lost = absl::StrCat("could not send the cell to the kernel: ", s.message());
  }
  pending_stdout_.clear();
  pending_stderr_.clear();
  bool drain_buffered = resume.has_value();

  while (!done && !lost) {
    const absl::Time now = absl::Now();
    if (now >= grace_deadline) {
      lost = absl::StrCat(stop ? stop_message : "the cell was interrupted",
                          ", and it did not stop within ", options_.interrupt_grace_ms,
                          " ms, so the kernel was killed");
      break;
    }
    if (!stop && now >= wall_deadline) {
      stop_cell(Outcome::kWallTimeout, absl::StrCat("the cell ran past its ", limits.wall_ms,
                                                    " ms wall-clock limit"));
    }
    if (!stop && now >= next_cpu_check && worker->has_cgroup()) {
      if (auto usage = worker->Usage()) {
        const int64_t used = usage->cpu_usage_ns - before.cpu_usage_ns;
        if (used >= cpu_limit_ns) {
          stop_cell(Outcome::kCpuTimeout, absl::StrCat("the cell used its ", limits.cpu_ms,
                                                       " ms of CPU time"));
        } else {
          next_cpu_check = now + std::max(absl::Milliseconds(2),
                                          absl::Nanoseconds((cpu_limit_ns - used) * 100 / cpu_percent));
        }
      }
    }
    if (now >= next_signal) interrupt_now();
    absl::Time wake = std::min({grace_deadline, next_signal, stop ? absl::InfiniteFuture() : wall_deadline});
    if (!stop && worker->has_cgroup()) wake = std::min(wake, next_cpu_check);
    // Resuming, the keeper's buffer may already hold the cell's last words:
    // look at them before waiting for more.
    const bool buffered = std::exchange(drain_buffered, false);
    const unsigned ready =
        worker->Wait(buffered ? absl::InfinitePast() : wake, false, wake_.get()) |
        (buffered ? Program::kChannel : 0u);

    if (ready & Program::kExtra) {
      uint64_t count;
      (void)!read(wake_.get(), &count, sizeof(count));
      bool requested;
      {
        absl::MutexLock lock(&mu_);
        requested = interrupt_requested_;
      }
      if (requested && next_signal == absl::InfiniteFuture()) interrupt_now();
    }
    if (ready & Program::kStdout) ReadAvailable(worker->stdout_fd(), out_sink);
    if (ready & Program::kStderr) ReadAvailable(worker->stderr_fd(), err_sink);
    if (ready & Program::kViolation) {
      r.violation = worker->violation();
      lost = absl::StrCat("the cell made a forbidden system call (", *r.violation,
                          "), so the kernel was killed");
      break;
    }
    if (ready & Program::kChannel) {
      bool open = ReadAvailable(worker->channel_fd(),
                                [this](const char* d, size_t n) { channel_.Feed(d, n); });
      for (;;) {
        auto message = channel_.Next();
        if (!message.ok()) {
          lost = std::string(message.status().message());
          break;
        }
        if (!*message) break;
        KernelMessage& m = **message;
        if (m.id != id) continue;  // a late word about an earlier cell
        switch (m.type) {
          case KernelMessage::Type::kDisplayData: {
            r.displays.push_back(m.data);
            emit(CellEvent{CellEvent::Kind::kDisplayData, "", m.data});
            break;
          }
          case KernelMessage::Type::kExecuteResult:
            r.result = m.data;
            emit(CellEvent{CellEvent::Kind::kExecuteResult, "", m.data});
            break;
          case KernelMessage::Type::kError: {
            CellError error{m.ename, m.evalue, m.traceback};
            r.error = error;
            emit(CellEvent{CellEvent::Kind::kError, "", {}, error});
            break;
          }
          case KernelMessage::Type::kDone:
            done = true;
            status = m.status;
            r.execution_count = m.execution_count;
            r.exit_code = m.exit_code;
            break;
          case KernelMessage::Type::kReady:
            lost = "the kernel restarted by itself";
            break;
          case KernelMessage::Type::kSnapshot:
          case KernelMessage::Type::kRestored:
            break;  // answers to requests, never about a cell
        }
        if (done || lost) break;
      }
      if (!open && !done && !lost) lost = "the kernel closed its channel";
    }
    if (!done && !lost && (ready & Program::kEnded)) {
      lost = absl::StrCat("the kernel died: ", DescribeExit(*worker));
      if (worker->main_exited()) {
        const int status = worker->main_status();
        if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
      }
    }
  }

  // Everything the cell wrote before `done` is already in the pipes.
  ReadAvailable(worker->stdout_fd(), out_sink);
  ReadAvailable(worker->stderr_fd(), err_sink);
  const CgroupUsage after = worker->Usage().value_or(before);
  r.wall_ms = absl::ToInt64Milliseconds(absl::Now() - start);
  r.cpu_ms = (after.cpu_usage_ns - before.cpu_usage_ns) / 1'000'000;
  r.peak_memory_bytes = after.peak_memory_bytes;
  const bool oom = after.oom_kills > before.oom_kills;
  r.limit = stop;

  if (lost) {
    MarkLost(*lost);
    r.message = *lost;
    r.outcome = r.violation ? Outcome::kViolation
                : oom       ? Outcome::kMemoryLimit
                            : Outcome::kSessionLost;
    if (oom) r.message = "the session ran out of memory and its kernel was killed";
  } else if (stop) {
    r.outcome = *stop;
    r.message = stop_message;
  } else if (oom) {
    r.outcome = Outcome::kMemoryLimit;
    r.message = "a process of the session ran out of memory and was killed";
  } else if (status == "ok") {
    r.outcome = Outcome::kOk;
  } else if (status == "interrupted") {
    r.outcome = Outcome::kInterrupted;
  } else {
    r.outcome = Outcome::kError;
  }
  absl::MutexLock lock(&mu_);
  busy_ = false;
  if (r.execution_count > 0) execution_count_ = r.execution_count;
  if (lost) r.execution_count = execution_count_;
  return r;
}

absl::Status Session::Restart(bool clear_workspace) {
  {
    absl::MutexLock lock(&mu_);
    if (busy_) return absl::FailedPreconditionError("a cell is running: interrupt it first");
  }
  if (clear_workspace && options_.machine) {
    return absl::FailedPreconditionError(
        "this session's workspace is shared with its other contexts and commands; remove the "
        "files instead of clearing the workspace");
  }
  bool in_place = !clear_workspace;
  {
    absl::MutexLock lock(&mu_);
    // The sandbox itself may be gone (its init killed): then only a fresh one will do.
    in_place = in_place && worker_ && worker_->SandboxAlive() && !worker_->setup_error();
  }
  if (auto s = StartWorker(!in_place); !s.ok()) {
    MarkLost(absl::StrCat("restart failed: ", s.message()));
    return s;
  }
  absl::MutexLock lock(&mu_);
  lost_.reset();
  execution_count_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<Session::OpenedWorkspace> Session::OpenWorkspace(const std::string& dir) const {
  absl::MutexLock lock(&mu_);
  if (!worker_) return absl::FailedPreconditionError("the session has no sandbox");
  // Opened as root (through the init's /proc/<pid>/root); everything
  // beneath it is then resolved as the sandbox's user (ScopedFsIds). The
  // path is the real one, never through a link the sandbox could change.
  const std::string path = worker_->RootPath() + (dir.empty() ? options_.workspace : dir);
  UniqueFd fd(open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return absl::FailedPreconditionError(
        "the session's sandbox is gone, and its workspace with it; restart the session");
  }
  return OpenedWorkspace{std::move(fd), worker_->program_host_uid(), worker_->program_host_gid()};
}

absl::Status Session::WriteFile(const std::string& path, const std::string& data) {
  ASSIGN_OR_RETURN(OpenedWorkspace ws, OpenWorkspace());
  ScopedFsIds as_sandbox_user(ws.uid, ws.gid);
  return WriteWorkspaceFile(ws.root.get(), path, data, options_.max_file_bytes);
}

absl::StatusOr<std::string> Session::ReadFile(const std::string& path) {
  ASSIGN_OR_RETURN(OpenedWorkspace ws, OpenWorkspace());
  ScopedFsIds as_sandbox_user(ws.uid, ws.gid);
  return ReadWorkspaceFile(ws.root.get(), path, options_.max_file_bytes);
}

absl::Status Session::InWorkspace(const std::function<absl::Status(int root_fd)>& op) {
  ASSIGN_OR_RETURN(OpenedWorkspace ws, OpenWorkspace());
  ScopedFsIds as_sandbox_user(ws.uid, ws.gid);
  return op(ws.root.get());
}

absl::StatusOr<std::vector<WorkspaceEntry>> Session::ListFiles(const std::string& dir, int max_depth) {
  ASSIGN_OR_RETURN(OpenedWorkspace ws, OpenWorkspace());
  ScopedFsIds as_sandbox_user(ws.uid, ws.gid);
  ASSIGN_OR_RETURN(std::vector<WorkspaceListing> listing,
                   ListWorkspace(ws.root.get(), dir, 10'000, max_depth));
  std::vector<WorkspaceEntry> out;
  for (const WorkspaceListing& e : listing) {
    WorkspaceEntry::Type type = e.type == 'f'   ? WorkspaceEntry::Type::kFile
                                : e.type == 'd' ? WorkspaceEntry::Type::kDirectory
                                : e.type == 'l' ? WorkspaceEntry::Type::kSymlink
                                                : WorkspaceEntry::Type::kOther;
    out.push_back({e.path, type, e.size, e.mode, e.modified_unix_ms});
  }
  return out;
}

namespace {
// Where the archive passes through the sandbox: its private /tmp, so the
// user's workspace never shows it.
constexpr char kArchiveDir[] = "/tmp";
constexpr char kArchiveName[] = ".warden-snapshot";
}  // namespace

absl::StatusOr<KernelMessage> Session::Request(const std::string& frame, int id,
                                               absl::Time deadline) {
  Program* worker = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (lost_) return absl::FailedPreconditionError(absl::StrCat("the session is lost: ", *lost_));
    if (!worker_) return absl::FailedPreconditionError("the session has no sandbox");
    if (busy_) return absl::FailedPreconditionError("a cell is running in this session");
    busy_ = true;
    worker = worker_.get();
  }
  auto finish = [this](absl::StatusOr<KernelMessage> answer) {
    absl::MutexLock lock(&mu_);
    busy_ = false;
    return answer;
  };
  if (auto s = WriteAll(worker->channel_fd(), frame, deadline); !s.ok()) {
    MarkLost(absl::StrCat("could not send a request to the kernel: ", s.message()));
    return finish(s);
  }
  auto discard = [](const char*, size_t) {};
  for (;;) {
    const unsigned ready = worker->Wait(deadline);
    if (ready & Program::kStdout) ReadAvailable(worker->stdout_fd(), discard);
    if (ready & Program::kStderr) ReadAvailable(worker->stderr_fd(), discard);
    if (ready & Program::kChannel) {
      const bool open = ReadAvailable(worker->channel_fd(),
                                      [this](const char* d, size_t n) { channel_.Feed(d, n); });
      for (;;) {
        auto message = channel_.Next();
        if (!message.ok()) {
          MarkLost(std::string(message.status().message()));
          return finish(absl::InternalError(absl::StrCat("the kernel's answer was garbled: ",
                                                         message.status().message())));
        }
        if (!*message) break;
        if ((*message)->id == id &&
            ((*message)->type == KernelMessage::Type::kSnapshot ||
             (*message)->type == KernelMessage::Type::kRestored)) {
          return finish(**std::move(message));
        }
      }
      if (!open) {
        MarkLost("the kernel closed its channel");
        return finish(absl::InternalError("the kernel closed its channel"));
      }
    }
    if (ready & (Program::kEnded | Program::kViolation)) {
      const std::string why = worker->violation()
                                  ? "it made a forbidden system call: " + *worker->violation()
                                  : DescribeExit(*worker);
      MarkLost(absl::StrCat("the kernel died: ", why));
      return finish(absl::InternalError(absl::StrCat("the kernel died: ", why)));
    }
    if (ready & Program::kTimedOut) {
      // The kernel may still answer later; its answer is then ignored (ids).
      return finish(absl::DeadlineExceededError("the kernel did not answer in time"));
    }
  }
}

absl::StatusOr<SessionSnapshot> Session::Snapshot(absl::Time deadline) {
  if (options_.language != Language::kPython) {
    return absl::UnimplementedError(absl::StrCat(
        "snapshots of ", LanguageName(options_.language),
        " sessions are not supported: only Python's interpreter state can be serialised "
        "(with dill); copy the files out with DownloadFile instead"));
  }
  const int id = next_cell_id_++;
  const std::string archive = absl::StrCat(kArchiveDir, "/", kArchiveName);
  const std::optional<CgroupUsage> before = Usage();
  ASSIGN_OR_RETURN(KernelMessage answer,
                   Request(KernelChannel::EncodeSnapshot(id, archive, options_.workspace), id, deadline));
  ASSIGN_OR_RETURN(OpenedWorkspace tmp, OpenWorkspace(kArchiveDir));
  ScopedFsIds as_sandbox_user(tmp.uid, tmp.gid);
  // Kept open, unlinked: read later straight from the sandbox's tmpfs.
  auto fd = OpenBeneath(tmp.root.get(), kArchiveName, O_RDONLY | O_NONBLOCK);
  unlinkat(tmp.root.get(), kArchiveName, 0);
  if (!answer.failure.empty()) {
    // The kernel packs in a child of its own (warden_kernel.py): at the
    // memory limit the OOM killer took that child, and the session is
    // whole. Said as what it is, with the figures to act on.
    const std::optional<CgroupUsage> after = Usage();
    if (before && after && after->oom_kills > before->oom_kills) {
      const int64_t limit_mb = options_.limits.memory_bytes >> 20;
      return absl::ResourceExhaustedError(absl::StrCat(
          "the snapshot was not taken: packing the session's state ran out of its memory (it holds ",
          before->memory_bytes >> 20, " MiB of its ", limit_mb,
          " MiB, and packing needs room for a copy of the state besides); the session is unharmed: free "
          "memory (del large variables) or give the session more memory, and try again"));
    }
    return absl::FailedPreconditionError(absl::StrCat("the kernel could not take a snapshot: ",
                                                      answer.failure));
  }
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat("reading the snapshot: ", fd.status().message()));
  }
  struct stat st;
  if (fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError("reading the snapshot: the archive is not a regular file");
  }
  if (st.st_size > options_.max_file_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "reading the snapshot: the archive is ", st.st_size, " bytes; the cap is ",
        options_.max_file_bytes));
  }
  return SessionSnapshot{SnapshotArchive{*std::move(fd), st.st_size}, answer.execution_count,
                         std::move(answer.left_out)};
}

absl::StatusOr<std::map<std::string, std::string>> Session::Restore(const SnapshotArchive& archive,
                                                                    absl::Time deadline) {
  if (options_.language != Language::kPython) {
    return absl::UnimplementedError(absl::StrCat("snapshots of ", LanguageName(options_.language),
                                                 " sessions are not supported"));
  }
  // Kept open until the kernel has read (and unlinked) it, then closed off
  // the caller's time: the last close frees the pages.
  UniqueFd copy;
  {
    ASSIGN_OR_RETURN(OpenedWorkspace tmp, OpenWorkspace(kArchiveDir));
    ScopedFsIds as_sandbox_user(tmp.uid, tmp.gid);
    ASSIGN_OR_RETURN(copy, OpenBeneath(tmp.root.get(), kArchiveName, O_WRONLY | O_CREAT | O_TRUNC, 0600));
    struct stat st;
    if (fstat(copy.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError("the sandbox's snapshot file is not a regular file");
    }
    RETURN_IF_ERROR(CopyArchive(archive, copy));
  }
  const int id = next_cell_id_++;
  ASSIGN_OR_RETURN(KernelMessage answer,
                   Request(KernelChannel::EncodeRestore(
                               id, absl::StrCat(kArchiveDir, "/", kArchiveName), options_.workspace),
                           id, deadline));
  CloseLater(std::move(copy));
  if (!answer.failure.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("the kernel could not restore the snapshot: ",
                                                      answer.failure));
  }
  absl::MutexLock lock(&mu_);
  execution_count_ = answer.execution_count;
  return std::move(answer.left_out);
}

void Session::Release() {
  absl::MutexLock lock(&mu_);
  worker_.reset();  // kills the sandbox and everything in it
  // No cell runs on a released session (Interrupt() needs a worker), so its
  // wake-up eventfd goes too: thousands of hibernated sessions then hold no
  // descriptor of the daemon's (docs/benchmarks.md, "Many sessions").
  wake_.Reset();
  released_ = true;
}

absl::Status Session::RenewWake() {
  absl::MutexLock lock(&mu_);
  if (wake_) return absl::OkStatus();
  wake_.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) return absl::ErrnoToStatus(errno, "eventfd");
  return absl::OkStatus();
}

absl::Status Session::Reopen() {
  RETURN_IF_ERROR(RenewWake());
  RETURN_IF_ERROR(StartWorker(/*fresh_sandbox=*/true));
  absl::MutexLock lock(&mu_);
  released_ = false;
  lost_.reset();
  execution_count_ = 0;
  return absl::OkStatus();
}

absl::Status Session::Reopen(std::unique_ptr<Session> fresh) {
  if (fresh == nullptr || fresh.get() == this || fresh->options_.language != options_.language) {
    return absl::InvalidArgumentError("Reopen needs a fresh session of the same language");
  }
  RETURN_IF_ERROR(RenewWake());
  absl::MutexLock lock(&mu_);
  absl::MutexLock theirs(&fresh->mu_);  // `fresh` is the caller's alone: no order to keep
  if (!fresh->worker_ || fresh->lost_ || fresh->busy_) {
    return absl::FailedPreconditionError("the warm session to reopen with is not ready");
  }
  worker_ = std::move(fresh->worker_);
  worker_->SetEgressGate(egress_gate_);  // this session's way out, not the warm one's
  channel_ = std::move(fresh->channel_);
  info_ = fresh->info_;
  start_times_ = fresh->start_times_;
  released_ = false;
  lost_.reset();
  execution_count_ = 0;
  return absl::OkStatus();
}

bool Session::released() const {
  absl::MutexLock lock(&mu_);
  return released_;
}

}  // namespace warden
