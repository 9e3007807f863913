// ForkServer: sandboxes cloned from a pre-initialised process (a "zygote").
//
// A fork server is a separate, single-threaded program (for Python,
// warden-python-zygote: an interpreter with the kernel and heavy modules
// already imported) that the supervisor starts with fork+exec, so nothing of
// the supervisor's memory is in it. For each sandbox the supervisor sends it
// the SandboxPlan and the child's ends of the pipes; the server clones the
// sandbox's init into fresh namespaces as the supervisor's own child
// (CLONE_PARENT) and hands back its pid and pidfd. From there on everything
// is as for a sandbox the supervisor cloned itself (id maps, cgroup, "go",
// the same containment sequence), except that the program does not execve:
// it runs on in the server's code (ChildPlan::run_in_place), so the
// interpreter and its imports are shared copy-on-write instead of rebuilt.
//
// The supervisor side (ForkServer) is thread-safe. The server side is
// ServeForkRequests, called by the zygote program once it is ready.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sandbox/sandbox_child.h"
#include "sandbox/unique_fd.h"

namespace warden {

// The fd at which a fork server program finds its socket to the supervisor.
inline constexpr int kForkServerFd = 3;

class ForkServer {
 public:
  struct Program {
    std::string path;               // absolute
    std::vector<std::string> argv;  // what it is called (its /proc cmdline)
    std::vector<std::string> env;   // all of its environment
    // Sent as the first message on its socket (e.g. what to load), so that
    // nothing of it shows in the cmdline or environment sandboxes inherit.
    std::string setup;
  };
  // Starts `program` with its socket at kForkServerFd, sends the setup
  // message and waits up to `timeout` for it to say it is ready. Its hello
  // message (e.g. the interpreter's version and warm modules) is kept as
  // description(); a server that reports a failure, dies or stays silent is
  // an error carrying what it said.
  static absl::StatusOr<std::unique_ptr<ForkServer>> Start(const Program& program,
                                                           absl::Duration timeout);
  // Closes the socket (the server exits on its own) and reaps the server;
  // sandboxes cloned from it are unaffected.
  ~ForkServer();

  struct Cloned {
    pid_t pid = -1;   // host pid of the sandbox's init, a child of this process
    UniqueFd pidfd;
  };
  // The child's fds, in the server's order; -1 for none (only `channel`
  // may be absent). They are duplicated into the server; the caller keeps
  // (and closes) its own.
  struct ChildFds {
    int control = -1, stdin_read = -1, stdout_write = -1, stderr_write = -1, channel = -1;
    // OpenBindSources' detached mounts, one per bind of the plan (not
    // owned); null when the sandbox opens its bind sources itself.
    const std::vector<int>* bind_trees = nullptr;
    // Prepared network, IPC and UTS namespaces (RecyclePool) to clone the
    // init into, all three or none (-1: fresh ones).
    int net = -1, ipc = -1, uts = -1;
  };
  // Clones one sandbox init from the plan (SandboxPlan::Encode()).
  // UNAVAILABLE once the server is gone (it is never restarted here).
  absl::StatusOr<Cloned> Clone(const std::string& encoded_plan, const ChildFds& fds);

  const std::string& description() const { return description_; }
  pid_t pid() const { return pid_; }
  bool alive() const;

 private:
  ForkServer() = default;

  pid_t pid_ = -1;
  UniqueFd pidfd_;
  std::string description_;
  mutable absl::Mutex mu_;
  UniqueFd socket_ ABSL_GUARDED_BY(mu_);
  bool dead_ ABSL_GUARDED_BY(mu_) = false;
};

// The server side, for the zygote program.
struct ForkServerHooks {
  // Around each clone in the server, e.g. the interpreter's fork handlers.
  void (*before_clone)() = nullptr;
  void (*after_clone)() = nullptr;
  // Runs the program in each sandbox, in place of execve (see ChildPlan).
  void (*run_in_place)(const ChildPlan& plan) = nullptr;
};

// Receives the supervisor's setup message (Program::setup); EOF or an
// error is an empty string.
std::string ReceiveForkServerSetup();

// Sends `hello` ("ok ..." when ready, "error ..." when not; the error ends
// the server), then serves clone requests on kForkServerFd until the
// supervisor closes it, and exits. The caller must be single-threaded: a
// clone copies only the calling thread, and locks held by any other would
// stay locked forever in every sandbox.
[[noreturn]] void ServeForkRequests(const std::string& hello, const ForkServerHooks& hooks);

// The number of threads of the calling process (from /proc/self/task).
int CountThreads();

}  // namespace warden
