// FakeLlmServer: runs tests/fake_openai_server.py (real HTTP on loopback)
// with a scripted conversation, and reads back what it was sent. The
// process is killed and reaped when the object goes.
#pragma once

#include <curl/curl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"

#ifndef WARDEN_TESTS_SRC
#error "WARDEN_TESTS_SRC must name the tests/ source directory"
#endif

namespace warden::testing {

class FakeLlmServer {
 public:
  // `responses` is the script's step list; `extra` are more flags
  // (--api-key K, --models a,b).
  static absl::StatusOr<std::unique_ptr<FakeLlmServer>> Start(const nlohmann::json& responses,
                                                              std::vector<std::string> extra = {}) {
    char dir_template[] = "/tmp/fake-llm-XXXXXX";
    if (!mkdtemp(dir_template)) return absl::InternalError("mkdtemp");
    const std::string script = absl::StrCat(dir_template, "/script.json");
    // A one-step script written {step} arrives as the step itself.
    nlohmann::json steps = responses.is_array() ? responses
                           : responses.is_null() ? nlohmann::json::array()
                                                 : nlohmann::json::array({responses});
    std::ofstream(script) << nlohmann::json{{"responses", steps}}.dump();
    int out[2];
    if (pipe(out) != 0) return absl::InternalError("pipe");
    std::vector<std::string> args = {"/usr/bin/python3", WARDEN_TESTS_SRC "/fake_openai_server.py", "--script",
                                     script};
    args.insert(args.end(), extra.begin(), extra.end());
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork");
    if (pid == 0) {
      dup2(out[1], 1);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    auto server = std::unique_ptr<FakeLlmServer>(new FakeLlmServer(pid, dir_template));
    if (line.empty()) return absl::InternalError("the fake LLM server did not start");
    server->port_ = std::stoi(line);
    return server;
  }

  ~FakeLlmServer() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    std::string cmd = absl::StrCat("rm -rf ", dir_);
    (void)system(cmd.c_str());
  }

  int port() const { return port_; }
  std::string base_url() const { return absl::StrCat("http://127.0.0.1:", port_, "/v1"); }

  // Every request so far: {"path", "body", "aborted", "authorization", "step"}.
  nlohmann::json Requests() const {
    std::string body;
    CURL* easy = curl_easy_init();
    const std::string url = absl::StrCat("http://127.0.0.1:", port_, "/_requests");
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(
        easy, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) -> size_t {
          static_cast<std::string*>(u)->append(d, s * n);
          return s * n;
        });
    curl_easy_perform(easy);
    curl_easy_cleanup(easy);
    return nlohmann::json::parse(body, nullptr, false);
  }

  // Waits (up to `timeout`) until `predicate(Requests())` holds.
  template <typename Predicate>
  bool WaitFor(Predicate predicate, absl::Duration timeout = absl::Seconds(30)) const {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (predicate(Requests())) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

 private:
  FakeLlmServer(pid_t pid, std::string dir) : pid_(pid), dir_(std::move(dir)) {}
  pid_t pid_;
  std::string dir_;
  int port_ = 0;
};

// A reply calling the code-execution tool.
inline nlohmann::json ToolCallStep(const std::string& code, const std::string& content = "") {
  return {{"content", content},
          {"tool_calls", {{{"name", "execute_code"}, {"arguments", nlohmann::json{{"code", code}}.dump()}}}}};
}
inline nlohmann::json TextStep(const std::string& content) { return {{"content", content}}; }

}  // namespace warden::testing
