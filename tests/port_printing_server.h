// PortPrintingServer: a test server run as a child process that prints the
// loopback port it listens on as its first line of stdout
// (tests/fake_openai_server.py, tests/local_model_server.py). Its stderr
// goes to a file of its own, so that a test can say how the server died
// (Death(): its exit status or signal and the end of its stderr) rather
// than what the server's absence made go wrong. The child is killed and
// reaped when the object goes.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace warden::testing {

class PortPrintingServer {
 public:
  // Runs argv[0] (a path) with argv; waits up to `timeout` for the port.
  static absl::StatusOr<std::unique_ptr<PortPrintingServer>> Start(std::vector<std::string> argv,
                                                                   absl::Duration timeout) {
    char log_template[] = "/tmp/port-printing-server-XXXXXX";
    const int log = mkostemp(log_template, O_CLOEXEC);
    if (log < 0) return absl::InternalError("mkostemp");
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe2");
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork");
    if (pid == 0) {
      dup2(out[1], 1);
      dup2(log, 2);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(out[1]);
    close(log);
    auto server = std::unique_ptr<PortPrintingServer>(new PortPrintingServer(pid, log_template));
    server->name_ = argv.size() > 1 ? argv[1] : argv[0];
    std::string line;
    const absl::Time deadline = absl::Now() + timeout;
    char c = 0;
    while (c != '\n') {
      pollfd p{out[0], POLLIN, 0};
      const int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (left <= 0 || poll(&p, 1, left) != 1 || read(out[0], &c, 1) != 1) break;
      if (c != '\n') line += c;
    }
    close(out[0]);
    if (c != '\n' || line.empty()) {
      std::string death = server->Death();
      if (death.empty()) death = absl::StrCat("it is still running; its stderr so far:\n", server->StderrTail());
      return absl::InternalError(absl::StrCat(server->name_, " did not print its port within ",
                                              absl::FormatDuration(timeout), ": ", death));
    }
    server->port_ = std::stoi(line);
    return server;
  }

  ~PortPrintingServer() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    unlink(log_.c_str());
  }

  int port() const { return port_; }
  std::string base_url() const { return absl::StrCat("http://127.0.0.1:", port_, "/v1"); }

  // "" while the server runs; once it has ended, how: "<name> exited with
  // status N" or "<name> was killed by signal N (SIGSEGV)", then the last
  // lines of its stderr. Waits up to `wait` for it to end (a client sees a
  // dying server's sockets close before its parent can reap it).
  std::string Death(absl::Duration wait = absl::ZeroDuration()) {
    const absl::Time deadline = absl::Now() + wait;
    while (!reaped_) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        status_ = status;
      } else if (absl::Now() >= deadline) {
        return "";
      } else {
        absl::SleepFor(absl::Milliseconds(10));
      }
    }
    std::string how =
        WIFSIGNALED(status_)
            ? absl::StrCat("was killed by signal ", WTERMSIG(status_), " (SIG", sigabbrev_np(WTERMSIG(status_)),
                           ")")
            : absl::StrCat("exited with status ", WEXITSTATUS(status_));
    std::string tail = StderrTail();
    return absl::StrCat(name_, " ", how, tail.empty() ? "; its stderr is empty" : "; its stderr ends:\n", tail);
  }

  // The last `lines` lines the server wrote to stderr.
  std::string StderrTail(size_t lines = 20) const {
    std::ifstream in(log_);
    std::vector<std::string> all;
    for (std::string line; std::getline(in, line);) all.push_back(line);
    std::ostringstream out;
    for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out << all[i] << "\n";
    return out.str();
  }

 private:
  PortPrintingServer(pid_t pid, std::string log) : pid_(pid), log_(std::move(log)) {}
  pid_t pid_;
  std::string log_;   // its stderr
  std::string name_;  // the script's path, for messages
  int port_ = 0;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace warden::testing
