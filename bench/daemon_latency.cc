// Latency through wardend's gRPC API over a UNIX socket, in one process:
// a warm session cell (x=1) and one-shot print(1) executions from the warm
// pool. Prints medians and p99; the benchmark issue builds the full suite
// with the anchors beside these figures.
//   build/bin/daemon_latency [cells] [oneshots]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "grpcpp/create_channel.h"
#include "server/daemon.h"
#include "warden/v1/executor.grpc.pb.h"

namespace {

struct Stats {
  double p50, p99;
};

Stats Percentiles(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 99 / 100)]};
}

template <typename F>
std::vector<double> Time(int n, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const int cells = argc > 1 ? atoi(argv[1]) : 2000;
  const int oneshots = argc > 2 ? atoi(argv[2]) : 100;
  warden::DaemonOptions options;
  const std::string socket = "/tmp/warden-bench-" + std::to_string(getpid()) + ".sock";
  options.listen = {"unix:" + socket};
  options.pools = {{"python", 4, {}}};
  auto daemon = warden::Daemon::Create(options);
  if (!daemon.ok() || !(*daemon)->Start().ok()) {
    fprintf(stderr, "cannot start the daemon\n");
    return 1;
  }
  auto stub = warden::v1::Executor::NewStub(grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));

  warden::v1::Session session;
  {
    grpc::ClientContext ctx;
    if (!stub->CreateSession(&ctx, warden::v1::CreateSessionRequest(), &session).ok()) return 1;
  }
  warden::v1::ExecuteRequest cell;
  cell.set_session_id(session.id());
  cell.set_code("x=1");
  int failures = 0;
  auto run_cell = [&] {
    grpc::ClientContext ctx;
    warden::v1::ExecuteResponse r;
    if (!stub->Execute(&ctx, cell, &r).ok() || r.outcome() != warden::v1::OUTCOME_OK) ++failures;
  };
  Time(100, run_cell);  // warm-up
  Stats c = Percentiles(Time(cells, run_cell));

  warden::v1::ExecuteRequest oneshot;
  oneshot.set_code("print(1)");
  auto run_oneshot = [&] {
    grpc::ClientContext ctx;
    warden::v1::ExecuteResponse r;
    if (!stub->Execute(&ctx, oneshot, &r).ok() || r.stdout() != "1\n") ++failures;
  };
  Stats o = Percentiles(Time(oneshots, run_oneshot));
  printf("session cell x=1:     p50 %.3f ms  p99 %.3f ms  (%d cells)\n", c.p50, c.p99, cells);
  printf("one-shot print(1):    p50 %.3f ms  p99 %.3f ms  (%d runs, pool of 4, refilled meanwhile)\n", o.p50,
         o.p99, oneshots);
  printf("failures: %d\n", failures);
  (*daemon)->Shutdown(absl::Seconds(5));
  return failures == 0 ? 0 : 1;
}
