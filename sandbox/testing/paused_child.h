// PausedChild: a forked child of the test that waits until killed, for
// tests of code that kills processes (and must kill only the right ones).
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace warden::testing {

// A child of the test that waits until killed; killed and reaped on scope exit.
class PausedChild {
 public:
  PausedChild() {
    pid_ = ::fork();
    if (pid_ == 0) {
      for (;;) ::pause();
    }
  }
  ~PausedChild() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // Blocks until the child exits; returns the signal that killed it (0 if none).
  int WaitForTermSignal() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  // True if the child has not exited.
  bool Alive() const {
    siginfo_t info{};
    return ::waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
  }

 private:
  pid_t pid_;
};

}  // namespace warden::testing
