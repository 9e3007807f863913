// keeper_restart: "restart with N live sessions: time until every session
// answers again" (docs/benchmarks.md). Starts warden-keeper with wardend on
// a directory of its own, creates N Python sessions each holding a value,
// then restarts wardend twice - SIGTERM (a reload) and kill -9 (a crash) -
// and times, from the signal and from the new wardend's start (its state
// record appearing), until every session has answered a cell with its own
// value. Prints the figures; asserts nothing.
//
//   keeper_restart [--sessions N]   (default 100)
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "warden/v1/executor.grpc.pb.h"

namespace {

using warden::v1::Executor;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t RecordedDaemon(const std::string& dir) {
  std::istringstream in(ReadText(dir + "/wardend.state"));
  std::string line;
  while (std::getline(in, line)) {
    pid_t pid;
    if (line.rfind("daemon ", 0) == 0 && absl::SimpleAtoi(line.substr(7), &pid)) return pid;
  }
  return 0;
}

std::unique_ptr<Executor::Stub> Connect(const std::string& socket, absl::Time deadline) {
  while (absl::Now() < deadline) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // never the old daemon's connection
    auto channel = grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args);
    if (channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::milliseconds(100))) {
      return Executor::NewStub(channel);
    }
  }
  return nullptr;
}

// Runs `print(x)` in the session until it answers `want`; false past the deadline.
bool Answers(Executor::Stub& stub, const std::string& id, const std::string& want, absl::Time deadline) {
  while (absl::Now() < deadline) {
    warden::v1::ExecuteRequest request;
    request.set_session_id(id);
    request.set_code("print(x)");
    warden::v1::ExecuteResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    ctx.set_wait_for_ready(true);
    if (stub.Execute(&ctx, request, &response).ok()) return response.stdout() == want;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int sessions = 100;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--sessions" && i + 1 < argc && absl::SimpleAtoi(argv[i + 1], &sessions)) {
      ++i;
    } else {
      std::cerr << "usage: keeper_restart [--sessions N]\n";
      return 2;
    }
  }
  char tmpl[] = "/tmp/warden-keeper-bench.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  const std::string bin = std::filesystem::canonical("/proc/self/exe").parent_path();
  std::ofstream(dir + "/wardend.json")
      << R"({"pools": [{"language": "python", "size": 2, "warm": []}], "sessions": {"max_total": )"
      << sessions + 10 << R"(, "max_per_tenant": )" << sessions + 10 << "}}";
  const std::string socket = dir + "/w.sock";
  const pid_t keeper = fork();
  if (keeper == 0) {
    const int fd = open((dir + "/wardend.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    execl((bin + "/warden-keeper").c_str(), "warden-keeper", "--socket", (dir + "/keeper.sock").c_str(), "--",
          (bin + "/wardend").c_str(), "--config", (dir + "/wardend.json").c_str(), "--listen",
          ("unix:" + socket).c_str(), "--state-dir", dir.c_str(), nullptr);
    _exit(127);
  }
  auto finish = [&](int code) {
    kill(keeper, SIGTERM);  // a stop for real: every session ends
    waitpid(keeper, nullptr, 0);
    std::filesystem::remove_all(dir);
    return code;
  };
  auto stub = Connect(socket, absl::Now() + absl::Seconds(120));
  if (!stub) return finish((std::cerr << "wardend did not start: " << ReadText(dir + "/wardend.log"), 1));

  std::vector<std::string> ids;
  for (int i = 0; i < sessions; ++i) {
    warden::v1::CreateSessionRequest request;
    request.set_language(warden::v1::LANGUAGE_PYTHON);
    warden::v1::Session session;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (!stub->CreateSession(&ctx, request, &session).ok()) {
      std::cerr << "could only create " << i << " sessions\n";
      break;
    }
    warden::v1::ExecuteRequest exec;
    exec.set_session_id(session.id());
    exec.set_code(absl::StrCat("x = ", i));
    warden::v1::ExecuteResponse response;
    grpc::ClientContext ctx2;
    stub->Execute(&ctx2, exec, &response);
    ids.push_back(session.id());
  }
  std::printf("keeper_restart: %zu live Python sessions\n", ids.size());

  for (int sig : {SIGTERM, SIGKILL}) {
    const pid_t old = RecordedDaemon(dir);
    const absl::Time signalled = absl::Now();
    kill(old, sig);
    absl::Time started;
    for (;;) {
      const pid_t now = RecordedDaemon(dir);
      if (now != 0 && now != old) {
        started = absl::Now();
        break;
      }
      if (absl::Now() - signalled > absl::Seconds(120)) return finish((std::cerr << "no new wardend\n", 1));
      absl::SleepFor(absl::Milliseconds(2));  // polling for the record: a measurement, not a test
    }
    stub = Connect(socket, absl::Now() + absl::Seconds(120));
    if (!stub) return finish((std::cerr << "the new wardend did not serve\n", 1));
    std::atomic<int> answered{0};
    std::vector<std::thread> threads;
    const int kThreads = 8;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (size_t i = t; i < ids.size(); i += kThreads) {
          if (Answers(*stub, ids[i], absl::StrCat(i, "\n"), absl::Now() + absl::Seconds(120))) ++answered;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    const absl::Time done = absl::Now();
    std::printf(
        "  after %-8s every session answered again: %d/%zu; %.0f ms after the signal, %.0f ms after the "
        "new wardend's start\n",
        sig == SIGTERM ? "SIGTERM" : "kill -9", answered.load(), ids.size(),
        absl::ToDoubleMilliseconds(done - signalled), absl::ToDoubleMilliseconds(done - started));
  }
  return finish(0);
}
