#include "kernel/command.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace warden {
namespace {

// Reads what `fd` has; each chunk becomes an event until `cap` bytes were
// taken. Returns false once past the cap.
template <typename Emit>
bool Drain(int fd, int64_t cap, int64_t* taken, Emit&& emit) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;  // drained (EAGAIN) or EOF
    const int64_t room = cap - *taken;
    const size_t keep = static_cast<size_t>(std::clamp<int64_t>(room, 0, n));
    if (keep > 0) emit(std::string(buf, keep));
    *taken += static_cast<int64_t>(keep);
    if (static_cast<int64_t>(n) > room) return false;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Command>> Command::Start(Executor& executor, const CommandSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("a command needs a program to run");
  if (spec.wall_ms < 0 || spec.cpu_ms < 0 || spec.output_bytes <= 0) {
    return absl::InvalidArgumentError("a command's wall_ms and cpu_ms must not be negative");
  }
  SandboxSpec sandbox;
  sandbox.argv = spec.argv;
  for (const std::string& kv : spec.env) {
    if (kv.find('=') == std::string::npos || kv.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment entry '", kv, "' must have the form KEY=value"));
    }
    sandbox.env.push_back(kv);
  }
  sandbox.cwd = spec.cwd.empty() ? "/workspace" : spec.cwd;
  sandbox.limits = spec.limits;
  if (spec.cpu_ms > 0) sandbox.limits.cpu_ms = spec.cpu_ms;
  sandbox.filesystem.binds = spec.binds;
  sandbox.filesystem.workspace_source = spec.workspace_dir;
  for (const std::string& alias : spec.workspace_aliases) {
    sandbox.filesystem.binds.push_back({spec.workspace_dir, alias, true});
  }
  auto command = std::unique_ptr<Command>(new Command(spec));
  command->wake_.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!command->wake_) return absl::ErrnoToStatus(errno, "eventfd");
  auto worker = executor.Spawn(sandbox, SpawnOptions{.identity_slot = spec.identity_slot,
                                                     .parent_cgroup = spec.parent_cgroup.get()});
  if (!worker.ok()) return worker.status();
  if (!spec.stdin_open) (*worker)->CloseStdin();
  command->started_ = (*worker)->started();
  command->supervisor_ = std::thread(&Command::Supervise, command.get(), *std::move(worker));
  return command;
}

Command::~Command() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  Wake();
  if (supervisor_.joinable()) supervisor_.join();
}

void Command::Wake() {
  uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
}

void Command::Push(CommandEvent event) {
  absl::MutexLock lock(&mu_);
  if (event.kind == CommandEvent::Kind::kEnd) ended_ = true;
  events_.push_back(std::move(event));
}

std::vector<CommandEvent> Command::Next(size_t* cursor, absl::Time deadline,
                                        const std::atomic<bool>* abandon) {
  absl::MutexLock lock(&mu_);
  auto more = [this, cursor, abandon]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return events_.size() > *cursor || (abandon != nullptr && abandon->load());
  };
  mu_.AwaitWithDeadline(absl::Condition(&more), deadline);
  std::vector<CommandEvent> out(events_.begin() + static_cast<ptrdiff_t>(std::min(*cursor, events_.size())),
                                events_.end());
  *cursor = events_.size();
  return out;
}

void Command::WakeReaders() {
  // Releasing mu_ makes absl::Mutex evaluate the waiters' conditions again.
  absl::MutexLock lock(&mu_);
}

bool Command::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

absl::Status Command::WriteStdin(const std::string& data) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return absl::FailedPreconditionError("the command has ended");
    if (!spec_.stdin_open || stdin_close_) {
      return absl::FailedPreconditionError(
          "the command's stdin is closed; start it with stdin open to send it input");
    }
    if (stdin_pending_.size() + data.size() > (16u << 20)) {
      return absl::ResourceExhaustedError("the command is not reading its stdin; 16 MiB are pending");
    }
    stdin_pending_ += data;
  }
  Wake();
  return absl::OkStatus();
}

absl::Status Command::CloseStdin() {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return absl::FailedPreconditionError("the command has ended");
    stdin_close_ = true;
  }
  Wake();
  return absl::OkStatus();
}

absl::Status Command::Signal(int sig) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return absl::FailedPreconditionError("the command has ended");
    signals_.push_back(sig);
  }
  Wake();
  return absl::OkStatus();
}

void Command::Supervise(std::unique_ptr<Worker> worker) {
  enum class Stop { kNone, kWall, kCpu, kOutput, kKilled };
  Stop stop = Stop::kNone;
  const absl::Time wall_deadline =
      spec_.wall_ms > 0 ? started_ + absl::Milliseconds(spec_.wall_ms) : absl::InfiniteFuture();
  const int64_t cpu_limit_ns = (spec_.cpu_ms > 0 ? spec_.cpu_ms : spec_.limits.cpu_ms) * 1'000'000;
  absl::Time next_cpu_check = started_;
  int64_t out_taken = 0, err_taken = 0;
  std::string pending;  // stdin taken from stdin_pending_, not yet written
  size_t offset = 0;
  bool closing = false;
  std::vector<int> deferred;  // signals sent before the program reported in
  auto emit = [this](CommandEvent::Kind kind) {
    return [this, kind](std::string data) { Push(CommandEvent{kind, std::move(data), {}}); };
  };

  while (stop == Stop::kNone) {
    const absl::Time now = absl::Now();
    if (now >= wall_deadline) {
      stop = Stop::kWall;
      break;
    }
    if (worker->has_cgroup() && now >= next_cpu_check) {
      if (auto usage = worker->Usage()) {
        if (usage->cpu_usage_ns >= cpu_limit_ns) {
          stop = Stop::kCpu;
          break;
        }
        const int64_t remaining_ns = cpu_limit_ns - usage->cpu_usage_ns;
        next_cpu_check = now + std::max(absl::Milliseconds(2),
                                        absl::Nanoseconds(remaining_ns * 100 / spec_.limits.cpu_percent));
      }
    }
    // Requests from other threads. The wake-up is consumed before they are
    // looked at, so one that comes in meanwhile wakes the Wait below.
    uint64_t drained;
    (void)!read(wake_.get(), &drained, sizeof(drained));
    std::vector<int> signals;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) {
        stop = Stop::kKilled;
        break;
      }
      if (offset >= pending.size() && !stdin_pending_.empty()) {
        pending = std::move(stdin_pending_);
        stdin_pending_.clear();
        offset = 0;
      }
      closing = stdin_close_;
      signals.swap(signals_);
    }
    // SIGKILL takes everything in the sandbox, through its init, which works
    // even before the program has reported in. Other signals wait for that.
    signals.insert(signals.begin(), deferred.begin(), deferred.end());
    deferred.clear();
    for (int sig : signals) {
      if (sig == SIGKILL) {
        (void)worker->KillProgram();
      } else if (absl::IsFailedPrecondition(worker->Signal(sig)) && !worker->ended()) {
        deferred.push_back(sig);
      }
    }
    if (worker->stdin_fd() >= 0 && closing && offset >= pending.size()) worker->CloseStdin();

    const bool have_pending = worker->stdin_fd() >= 0 && offset < pending.size();
    absl::Time deadline = worker->has_cgroup() ? std::min(wall_deadline, next_cpu_check) : wall_deadline;
    // A deferred signal is retried shortly: the program reports in within
    // milliseconds of starting.
    if (!deferred.empty()) deadline = std::min(deadline, absl::Now() + absl::Milliseconds(5));
    const unsigned ready = worker->Wait(deadline, have_pending, wake_.get());
    if ((ready & Worker::kStdout) &&
        !Drain(worker->stdout_fd(), spec_.output_bytes, &out_taken, emit(CommandEvent::Kind::kStdout))) {
      stop = Stop::kOutput;
    }
    if ((ready & Worker::kStderr) &&
        !Drain(worker->stderr_fd(), spec_.output_bytes, &err_taken, emit(CommandEvent::Kind::kStderr))) {
      stop = Stop::kOutput;
    }
    if (ready & (Worker::kEnded | Worker::kViolation)) break;
    if (ready & Worker::kStdinWritable) {
      ssize_t n = write(worker->stdin_fd(), pending.data() + offset, pending.size() - offset);
      if (n > 0) offset += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) worker->CloseStdin();  // reader gone
    }
  }
  const absl::Time end = absl::Now();

  // Everything left in the sandbox dies with the command's main process.
  worker->Kill();
  if (!Drain(worker->stdout_fd(), spec_.output_bytes, &out_taken, emit(CommandEvent::Kind::kStdout)) ||
      !Drain(worker->stderr_fd(), spec_.output_bytes, &err_taken, emit(CommandEvent::Kind::kStderr))) {
    if (stop == Stop::kNone) stop = Stop::kOutput;
  }
  const CgroupUsage usage = worker->Usage().value_or(CgroupUsage{});
  CommandEnd r;
  r.wall_ms = absl::ToInt64Milliseconds(end - started_);
  r.cpu_ms = usage.cpu_usage_ns / 1'000'000;
  r.peak_memory_bytes = usage.peak_memory_bytes;
  r.violation = worker->violation();
  const int status = worker->main_status();
  if (worker->main_exited()) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  if (worker->setup_error()) {
    r.outcome = Outcome::kSetupError;
    r.message = *worker->setup_error();
  } else if (r.violation) {
    r.outcome = Outcome::kViolation;
  } else if (stop == Stop::kOutput) {
    r.outcome = Outcome::kOutputLimit;
    r.message = absl::StrCat("the command wrote more than ", spec_.output_bytes, " bytes to a stream");
  } else if (stop == Stop::kCpu) {
    r.outcome = Outcome::kCpuTimeout;
  } else if (stop == Stop::kWall) {
    r.outcome = Outcome::kWallTimeout;
    r.message = absl::StrCat("the command ran past its ", spec_.wall_ms, " ms");
  } else if (stop == Stop::kKilled) {
    r.outcome = Outcome::kSignaled;
    r.signal = SIGKILL;
    r.message = "the session ended";
  } else if (usage.oom_kills > 0) {
    r.outcome = Outcome::kMemoryLimit;
  } else if (worker->main_exited() && WIFEXITED(status)) {
    r.outcome = r.exit_code == 0 ? Outcome::kOk : Outcome::kNonzeroExit;
  } else if (worker->main_exited() && WIFSIGNALED(status)) {
    r.outcome = r.signal == SIGXCPU ? Outcome::kCpuTimeout : Outcome::kSignaled;
  } else {
    r.outcome = Outcome::kInternal;
    r.message = "the sandbox's init exited before the command ended";
  }
  worker.reset();
  Push(CommandEvent{CommandEvent::Kind::kEnd, {}, r});
}

}  // namespace warden
