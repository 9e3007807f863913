// Command: one program run beside a session's interpreters, in a sandbox of
// its own that binds the session's shared workspace (kernel/
// shared_workspace.h) and runs as the same user - what E2B calls
// commands.run. Its cgroup is nested in the session's, whose memory and pids
// limits it shares with the interpreters; it has its own wall and CPU
// deadlines (0: none) and an output cap per stream; its stdout
// and stderr are kept as events in order, so a reader can follow from the
// start or reattach later; stdin stays open when asked for.
//
// A thread of the Command's own supervises the sandbox (the Worker is used
// by that thread only); every other call may come from any thread.
// Destroying a Command kills whatever is left of it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sandbox/result.h"
#include "sandbox/sandbox.h"

namespace warden {

struct CommandSpec {
  std::vector<std::string> argv;  // e.g. {"/bin/bash", "-l", "-c", "ls"}
  std::vector<std::string> env;   // "KEY=value", on top of the sandbox's defaults
  std::string cwd = "/workspace";
  Limits limits;            // memory, pids and tmpfs as the session's
  int64_t wall_ms = 0;      // 0: until it ends, is killed, or the session goes
  int64_t cpu_ms = 0;       // 0: the limits' default
  int64_t output_bytes = 1LL << 20;  // each of stdout and stderr
  bool stdin_open = false;  // false: stdin is at EOF from the start
  std::string workspace_dir;
  std::vector<std::string> workspace_aliases;
  std::optional<uint64_t> identity_slot;
  std::vector<BindMount> binds;
  std::shared_ptr<Cgroup> parent_cgroup;  // the session's (SessionOptions::parent_cgroup)
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
  // `executor` is not owned and must outlive the command.
  static absl::StatusOr<std::unique_ptr<Command>> Start(Executor& executor, const CommandSpec& spec);
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

  // Queued for the supervising thread; FAILED_PRECONDITION once it ended.
  absl::Status WriteStdin(const std::string& data);
  absl::Status CloseStdin();
  absl::Status Signal(int sig);  // to the command's process group

  const CommandSpec& spec() const { return spec_; }
  absl::Time started() const { return started_; }

 private:
  Command(const CommandSpec& spec) : spec_(spec) {}
  void Supervise(std::unique_ptr<Worker> worker);
  void Wake();
  void Push(CommandEvent event);

  const CommandSpec spec_;
  absl::Time started_;
  UniqueFd wake_;  // eventfd: requests for the supervising thread
  std::thread supervisor_;

  mutable absl::Mutex mu_;
  std::vector<CommandEvent> events_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::string stdin_pending_ ABSL_GUARDED_BY(mu_);
  bool stdin_close_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int> signals_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;  // the destructor: kill and leave
};

}  // namespace warden
