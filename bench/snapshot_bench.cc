// Snapshot figures through wardend's gRPC API (issue 12's goals): ForkSession
// of a session holding a 10 MB DataFrame, new sandbox included, and the
// first answered cell of a session restored from hibernation. Prints p50
// and max; docs/benchmarks.md keeps the figures.
//   build/bin/snapshot_bench [forks] [wakes]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/create_channel.h"
#include "server/daemon.h"
#include "warden/v1/executor.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void Print(const char* what, std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  printf("%-48s p50 %8.1f ms   max %8.1f ms   (n=%zu)\n", what, ms[ms.size() / 2], ms.back(), ms.size());
}

bool Run(warden::v1::Executor::Stub& stub, const std::string& session, const std::string& code) {
  grpc::ClientContext ctx;
  warden::v1::ExecuteRequest request;
  request.set_session_id(session);
  request.set_code(code);
  warden::v1::ExecuteResponse response;
  return stub.Execute(&ctx, request, &response).ok() && response.outcome() == warden::v1::OUTCOME_OK;
}

warden::v1::SessionState State(warden::v1::Executor::Stub& stub, const std::string& session) {
  grpc::ClientContext ctx;
  warden::v1::GetSessionRequest request;
  request.set_session_id(session);
  warden::v1::Session out;
  (void)stub.GetSession(&ctx, request, &out);
  return out.state();
}

void Close(warden::v1::Executor::Stub& stub, const std::string& session) {
  grpc::ClientContext ctx;
  warden::v1::CloseSessionRequest request;
  request.set_session_id(session);
  warden::v1::CloseSessionResponse response;
  (void)stub.CloseSession(&ctx, request, &response);
}

}  // namespace

int main(int argc, char** argv) {
  const int forks = argc > 1 ? atoi(argv[1]) : 20;
  const int wakes = argc > 2 ? atoi(argv[2]) : 5;
  const std::string dir = "/tmp/warden-snapshot-bench-" + std::to_string(getpid());
  warden::DaemonOptions options;
  options.listen = {"unix:" + dir + ".sock"};
  options.pools = {{"python", 4, {"numpy", "pandas"}}};
  options.sessions.hibernate_after_seconds = 1;
  options.snapshots.dir = dir;
  auto daemon = warden::Daemon::Create(options);
  if (!daemon.ok() || !(*daemon)->Start().ok()) {
    fprintf(stderr, "cannot start the daemon\n");
    return 1;
  }
  auto stub = warden::v1::Executor::NewStub(grpc::CreateChannel(options.listen[0], grpc::InsecureChannelCredentials()));
  const std::string state =
      "import numpy as np, pandas as pd\n"
      "df = pd.DataFrame(np.random.rand(163840, 8))  # 10 MiB of float64\n";

  warden::v1::Session source;
  {
    grpc::ClientContext ctx;
    if (!stub->CreateSession(&ctx, warden::v1::CreateSessionRequest(), &source).ok()) return 1;
  }
  if (!Run(*stub, source.id(), state)) return 1;
  std::vector<double> fork_ms, first_cell_ms;
  for (int i = 0; i < forks; ++i) {
    grpc::ClientContext ctx;
    warden::v1::ForkSessionRequest request;
    request.set_session_id(source.id());
    warden::v1::ForkSessionResponse response;
    const auto start = Clock::now();
    if (!stub->ForkSession(&ctx, request, &response).ok()) return 1;
    fork_ms.push_back(Ms(start));
    if (!Run(*stub, response.session().id(), "assert df.shape == (163840, 8)")) return 1;
    first_cell_ms.push_back(Ms(start));
    Close(*stub, response.session().id());
    Run(*stub, source.id(), "0");  // keeps the source from hibernating meanwhile
  }
  Print("ForkSession, 10 MB DataFrame, new sandbox", fork_ms);
  Print("ForkSession + first cell in the fork", first_cell_ms);

  std::vector<double> wake_ms;
  for (int i = 0; i < wakes; ++i) {
    while (State(*stub, source.id()) != warden::v1::SESSION_STATE_HIBERNATED) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const auto start = Clock::now();
    if (!Run(*stub, source.id(), "df.shape")) return 1;
    wake_ms.push_back(Ms(start));
  }
  Print("hibernated 10 MB session -> first answered cell", wake_ms);
  (*daemon)->Shutdown(absl::Seconds(5));
  std::filesystem::remove_all(dir);
  return 0;
}
