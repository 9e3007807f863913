// PortPrintingServer: a test server run as a child process that prints the
// loopback port it listens on as its first line of stdout
// (tests/fake_openai_server.py, tests/local_model_server.py). The child is
// killed and reaped when the object goes.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
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
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe2");
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork");
    if (pid == 0) {
      dup2(out[1], 1);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(out[1]);
    auto server = std::unique_ptr<PortPrintingServer>(new PortPrintingServer(pid));
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
      return absl::InternalError(absl::StrCat(argv.size() > 1 ? argv[1] : argv[0], " did not print its port"));
    }
    server->port_ = std::stoi(line);
    return server;
  }

  ~PortPrintingServer() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

  int port() const { return port_; }
  std::string base_url() const { return absl::StrCat("http://127.0.0.1:", port_, "/v1"); }

 private:
  explicit PortPrintingServer(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  int port_ = 0;
};

}  // namespace warden::testing
