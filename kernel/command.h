// Command: one program run in a session's machine (sandbox/machine.h)
// beside its interpreters - what E2B calls commands.run, and what `docker
// exec` is to a container. It shares the machine's files, process table and
// cgroup (whose memory and pids limits hold for all its processes
// together); it has its own wall-clock deadline (0: none), CPU limit (an
// rlimit of its processes) and output cap per stream; its stdout and stderr
// (or its terminal's output) are kept as events in order, so a reader can
// follow from the start or reattach later; stdin stays open when asked for.
// What it leaves running in other process groups when its main process
// ends stays, as on any machine; a limit or a kill ends its process group.
//
// A thread of the Command's own supervises the process (the MachineProcess
// is used by that thread only); every other call may come from any thread.
// Destroying a Command kills its process group.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sandbox/result.h"
#include "sandbox/machine.h"
#include "sandbox/sandbox.h"

namespace warden {

struct CommandSpec {
  std::shared_ptr<Machine> machine;  // where it runs
  std::vector<std::string> argv;  // e.g. {"/bin/bash", "-l", "-c", "ls"}
  std::vector<std::string> env;   // its whole environment, "KEY=value"
  std::string cwd = "/";
  int64_t wall_ms = 0;      // 0: until it ends, is killed, or the session goes
  int64_t cpu_ms = 0;       // RLIMIT_CPU of its processes; 0: the machine's
  int64_t output_bytes = 1LL << 20;  // each of stdout and stderr
  bool stdin_open = false;  // false: stdin is at EOF from the start
  // A terminal of this size (columns, rows) instead of pipes: its output
  // comes as kStdout events, WriteStdin types into it.
  std::optional<std::pair<uint16_t, uint16_t>> terminal;
};

// How a command ended: its Result without the output (that came as events).
struct CommandEnd {
  Outcome outcome = Outcome::kInternal;
  int exit_code = -1;
  int signal = 0;
  int64_t wall_ms = 0;
  int64_t cpu_ms = 0;
  int64_t peak_memory_bytes = 0;
  std::optional<std::string> violation;
  std::string message;
};

struct CommandEvent {
  enum class Kind { kStdout, kStderr, kEnd };
  Kind kind = Kind::kStdout;
  std::string data;  // kStdout / kStderr
  CommandEnd end;    // kEnd, always the last event
};

class Command {
 public:
  // Starts the process and waits until it reported in (its pid known) or
  // failed to. An error when no process could be started at all.
  static absl::StatusOr<std::unique_ptr<Command>> Start(const CommandSpec& spec);
  ~Command();
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  // The events after the first `*cursor`, waiting until there is at least
  // one, `deadline`, or `*abandon` (may be null) is set and WakeReaders is
  // called; advances *cursor. The kEnd event is the last.
  std::vector<CommandEvent> Next(size_t* cursor, absl::Time deadline,
                                 const std::atomic<bool>* abandon = nullptr);
  // Makes every waiting Next look at its `abandon` flag again.
  void WakeReaders();
  bool ended() const;
  // True once the command has ended, false if `deadline` came first.
  bool WaitEnded(absl::Time deadline) const;

  // Queued for the supervising thread; FAILED_PRECONDITION once it ended.
  absl::Status WriteStdin(const std::string& data);
  absl::Status CloseStdin();
  // To the command's process group. SIGKILL returns once the command's
  // process has ended and been reaped (at most 5 s).
  absl::Status Signal(int sig);
  // A terminal's new size; FAILED_PRECONDITION without a terminal.
  absl::Status Resize(uint16_t cols, uint16_t rows);
  // Its process id in the machine (E2B's pid).
  pid_t pid() const { return pid_; }

  const CommandSpec& spec() const { return spec_; }
  absl::Time started() const { return started_; }

 private:
  Command(const CommandSpec& spec) : spec_(spec) {}
  void Supervise(std::unique_ptr<MachineProcess> process);
  void Wake();
  void Push(CommandEvent event);

  const CommandSpec spec_;
  absl::Time started_;
  pid_t pid_ = 0;
  UniqueFd wake_;  // eventfd: requests for the supervising thread
  std::thread supervisor_;

  mutable absl::Mutex mu_;
  std::vector<CommandEvent> events_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::string stdin_pending_ ABSL_GUARDED_BY(mu_);
  bool stdin_close_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int> signals_ ABSL_GUARDED_BY(mu_);
  std::optional<std::pair<uint16_t, uint16_t>> resize_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;  // the destructor: kill and leave
};

}  // namespace warden
