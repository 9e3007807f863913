// FakeLlmServer: runs tests/fake_openai_server.py (real HTTP on loopback)
// with a scripted conversation, and reads back what it was sent. The
// process is killed and reaped when the object goes. LocalModelServer: a
// real language model behind the same protocol (tests/local_model_server.py).
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
#include "tests/port_printing_server.h"

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
    std::vector<std::string> args = {"/usr/bin/python3", WARDEN_TESTS_SRC "/fake_openai_server.py", "--script",
                                     script};
    args.insert(args.end(), extra.begin(), extra.end());
    auto process = PortPrintingServer::Start(std::move(args), absl::Seconds(30));
    auto server = std::unique_ptr<FakeLlmServer>(new FakeLlmServer(dir_template));
    if (!process.ok()) return process.status();
    server->process_ = std::move(*process);
    return server;
  }

  // No script: relays every request to a real server at `upstream`
  // (.../v1), recording it (fake_openai_server.py --upstream).
  static absl::StatusOr<std::unique_ptr<FakeLlmServer>> Relay(const std::string& upstream) {
    auto process = PortPrintingServer::Start(
        {"/usr/bin/python3", WARDEN_TESTS_SRC "/fake_openai_server.py", "--upstream", upstream}, absl::Seconds(30));
    if (!process.ok()) return process.status();
    auto server = std::unique_ptr<FakeLlmServer>(new FakeLlmServer(""));
    server->process_ = std::move(*process);
    return server;
  }

  ~FakeLlmServer() {
    process_.reset();
    if (dir_.empty()) return;
    std::string cmd = absl::StrCat("rm -rf ", dir_);
    (void)system(cmd.c_str());
  }

  int port() const { return process_->port(); }
  std::string base_url() const { return process_->base_url(); }
  // "" while the server runs; how it ended (PortPrintingServer::Death).
  std::string Death(absl::Duration wait = absl::ZeroDuration()) { return process_->Death(wait); }

  // Every request so far: {"path", "body", "aborted", "authorization", "step"}.
  nlohmann::json Requests() const {
    std::string body;
    CURL* easy = curl_easy_init();
    const std::string url = absl::StrCat("http://127.0.0.1:", port(), "/_requests");
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
  explicit FakeLlmServer(std::string dir) : dir_(std::move(dir)) {}
  std::unique_ptr<PortPrintingServer> process_;
  std::string dir_;
};

#ifdef WARDEN_PYENV
// A real language model, SmolLM2-135M-Instruct, served by llama-cpp-python
// from the tests' virtualenv (tests/local_model_server.py; `make test-deps`
// installs it): an OpenAI-compatible server with tool calling.
struct LocalModelServer {
  static constexpr char kModel[] = "smollm2-135m-instruct";
  static absl::StatusOr<std::unique_ptr<PortPrintingServer>> Start() {
    const std::string python = WARDEN_PYENV "/bin/python";
    if (access(python.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(python, " is missing: run `make test-deps`, which installs the local model and its server"));
    }
    return PortPrintingServer::Start({python, WARDEN_TESTS_SRC "/local_model_server.py"}, absl::Seconds(180));
  }
};
#endif

// A reply calling the code-execution tool.
inline nlohmann::json ToolCallStep(const std::string& code, const std::string& content = "") {
  return {{"content", content},
          {"tool_calls", {{{"name", "execute_code"}, {"arguments", nlohmann::json{{"code", code}}.dump()}}}}};
}
inline nlohmann::json TextStep(const std::string& content) { return {{"content", content}}; }

}  // namespace warden::testing
