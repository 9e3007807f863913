#include "kernel/command.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

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

absl::StatusOr<std::unique_ptr<Command>> Command::Start(const CommandSpec& spec) {
  if (spec.machine == nullptr) return absl::InvalidArgumentError("a command runs in a machine");
  if (spec.argv.empty()) return absl::InvalidArgumentError("a command needs a program to run");
  if (spec.wall_ms < 0 || spec.cpu_ms < 0 || spec.output_bytes <= 0) {
    return absl::InvalidArgumentError("a command's wall_ms and cpu_ms must not be negative");
  }
  ProcessSpec process;
  process.argv = spec.argv;
  process.env = spec.env;
  process.cwd = spec.cwd.empty() ? "/" : spec.cwd;
  process.cpu_ms = spec.cpu_ms;
  process.terminal = spec.terminal;
  auto command = std::unique_ptr<Command>(new Command(spec));
  command->wake_.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!command->wake_) return absl::ErrnoToStatus(errno, "eventfd");
  ASSIGN_OR_RETURN(std::unique_ptr<MachineProcess> started, spec.machine->Spawn(process));
  // Its pid names it: wait until it reported in. Whatever it wrote
  // meanwhile stays in the pipes for the supervising thread.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (started->sandbox_pid() == 0) {
    const unsigned ready = started->Wait(deadline);
    if (started->sandbox_pid() != 0) break;
    if (ready & Program::kEnded) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the command could not start: ",
          started->setup_error().value_or(spec.machine->Alive() ? "it ended at once" : "the machine is gone")));
    }
    if (ready & Program::kTimedOut) return absl::DeadlineExceededError("the command did not start within 30 s");
  }
  command->pid_ = started->sandbox_pid();
  if (!spec.stdin_open && !spec.terminal) started->CloseStdin();
  command->started_ = started->started();
  command->supervisor_ = std::thread(&Command::Supervise, command.get(), std::move(started));
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

bool Command::WaitEnded(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(&ended_), deadline);
}

absl::Status Command::WriteStdin(const std::string& data) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return absl::FailedPreconditionError("the command has ended");
    if ((!spec_.stdin_open && !spec_.terminal) || stdin_close_) {
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

absl::Status Command::Resize(uint16_t cols, uint16_t rows) {
  if (!spec_.terminal) return absl::FailedPreconditionError("the command has no terminal; start it with one");
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return absl::FailedPreconditionError("the command has ended");
    resize_ = {cols, rows};
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
  if (sig == SIGKILL) {
    // A kill is done when the process is: its pid is free again, so the
    // next command that looks for it (`kill -0 PID`) no longer finds it.
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&ended_), absl::Seconds(5));
  }
  return absl::OkStatus();
}

void Command::Supervise(std::unique_ptr<MachineProcess> worker) {
  enum class Stop { kNone, kWall, kOutput, kKilled };
  Stop stop = Stop::kNone;
  const absl::Time wall_deadline =
      spec_.wall_ms > 0 ? started_ + absl::Milliseconds(spec_.wall_ms) : absl::InfiniteFuture();
  const CgroupUsage before = worker->Usage().value_or(CgroupUsage{});
  int64_t out_taken = 0, err_taken = 0;
  std::string pending;  // stdin taken from stdin_pending_, not yet written
  size_t offset = 0;
  bool closing = false;
  auto emit = [this](CommandEvent::Kind kind) {
    return [this, kind](std::string data) { Push(CommandEvent{kind, std::move(data), {}}); };
  };

  while (stop == Stop::kNone) {
    if (absl::Now() >= wall_deadline) {
      stop = Stop::kWall;
      break;
    }
    // Requests from other threads. The wake-up is consumed before they are
    // looked at, so one that comes in meanwhile wakes the Wait below.
    uint64_t drained;
    (void)!read(wake_.get(), &drained, sizeof(drained));
    std::vector<int> signals;
    std::optional<std::pair<uint16_t, uint16_t>> resize;
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
      resize.swap(resize_);
    }
    for (int sig : signals) {
      if (sig == SIGKILL) {
        (void)worker->KillProgram();
      } else {
        (void)worker->Signal(sig);
      }
    }
    if (resize) (void)worker->Resize(resize->first, resize->second);
    if (!spec_.terminal && worker->stdin_fd() >= 0 && closing && offset >= pending.size()) {
      worker->CloseStdin();
    }

    const bool have_pending = worker->stdin_fd() >= 0 && offset < pending.size();
    const unsigned ready = worker->Wait(wall_deadline, have_pending, wake_.get());
    if ((ready & Program::kStdout) &&
        !Drain(worker->stdout_fd(), spec_.output_bytes, &out_taken, emit(CommandEvent::Kind::kStdout))) {
      stop = Stop::kOutput;
    }
    if ((ready & Program::kStderr) &&
        !Drain(worker->stderr_fd(), spec_.output_bytes, &err_taken, emit(CommandEvent::Kind::kStderr))) {
      stop = Stop::kOutput;
    }
    if (ready & (Program::kEnded | Program::kViolation)) break;
    if (ready & Program::kStdinWritable) {
      ssize_t n = write(worker->stdin_fd(), pending.data() + offset, pending.size() - offset);
      if (n > 0) offset += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR && !spec_.terminal) worker->CloseStdin();  // reader gone
    }
  }
  const absl::Time end = absl::Now();

  // A limit, a violation or a kill ends the command's process group; what
  // it left running elsewhere after a normal end stays, as on any machine.
  if (stop != Stop::kNone || worker->violation()) {
    (void)worker->KillProgram();
    const absl::Time reap_deadline = absl::Now() + absl::Seconds(5);
    while (!worker->ended() && !(worker->Wait(reap_deadline) & Program::kTimedOut)) {
      if (!Drain(worker->stdout_fd(), spec_.output_bytes, &out_taken, emit(CommandEvent::Kind::kStdout)) ||
          !Drain(worker->stderr_fd(), spec_.output_bytes, &err_taken, emit(CommandEvent::Kind::kStderr))) {
        if (stop == Stop::kNone) stop = Stop::kOutput;
      }
    }
  }
  // What the process wrote before it ended is in the pipes by now.
  if (!Drain(worker->stdout_fd(), spec_.output_bytes, &out_taken, emit(CommandEvent::Kind::kStdout)) ||
      !Drain(worker->stderr_fd(), spec_.output_bytes, &err_taken, emit(CommandEvent::Kind::kStderr))) {
    if (stop == Stop::kNone) stop = Stop::kOutput;
  }
  const CgroupUsage usage = worker->Usage().value_or(before);
  CommandEnd r;
  r.wall_ms = absl::ToInt64Milliseconds(end - started_);
  r.cpu_ms = worker->cpu_us() / 1000;
  r.peak_memory_bytes = usage.peak_memory_bytes;
  r.violation = worker->violation();
  const int status = worker->main_status();
  if (worker->main_exited()) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  const bool oom = usage.oom_kills > before.oom_kills && r.signal == SIGKILL;
  if (worker->setup_error()) {
    r.outcome = Outcome::kSetupError;
    r.message = *worker->setup_error();
  } else if (r.violation) {
    r.outcome = Outcome::kViolation;
    r.message = absl::StrCat("the command made a forbidden system call (", *r.violation,
                             "), so its process group was killed");
  } else if (stop == Stop::kOutput) {
    r.outcome = Outcome::kOutputLimit;
    r.message = absl::StrCat("the command wrote more than ", spec_.output_bytes, " bytes to a stream");
  } else if (stop == Stop::kWall) {
    r.outcome = Outcome::kWallTimeout;
    r.message = absl::StrCat("the command ran past its ", spec_.wall_ms, " ms");
  } else if (stop == Stop::kKilled) {
    r.outcome = Outcome::kSignaled;
    r.signal = SIGKILL;
    r.message = "the session ended";
  } else if (oom) {
    r.outcome = Outcome::kMemoryLimit;
    r.message = "the session ran out of memory and the command was killed";
  } else if (worker->main_exited() && WIFEXITED(status)) {
    r.outcome = r.exit_code == 0 ? Outcome::kOk : Outcome::kNonzeroExit;
  } else if (worker->main_exited() && WIFSIGNALED(status)) {
    r.outcome = r.signal == SIGXCPU ? Outcome::kCpuTimeout : Outcome::kSignaled;
    if (r.signal == SIGXCPU) r.message = absl::StrCat("the command used its ", spec_.cpu_ms, " ms of CPU time");
  } else {
    r.outcome = Outcome::kSignaled;
    r.signal = SIGKILL;
    r.message = absl::StrCat("the session's machine went: ", spec_.machine->lost_reason());
  }
  worker.reset();
  Push(CommandEvent{CommandEvent::Kind::kEnd, {}, r});
}

}  // namespace warden
