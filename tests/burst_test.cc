// Bursts against an in-process wardend over real gRPC (issue 28): requests
// within the quotas queue and are served, in turn between tenants, with no
// thread waiting for each; only what its line could not serve before its
// deadline is refused, at once, saying when to retry.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden {
namespace {

using v1::Executor;

constexpr char kAliceToken[] = "alice-Burst7Hq2Vx9LmR4sTk8";
constexpr char kBobToken[] = "bob-Burst5Fw1QcN6yUg0XbE2";

// Threads of this process now.
int Threads() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(dir)) n += entry->d_name[0] != '.';
    closedir(dir);
  }
  return n;
}

// This process's resident memory, in bytes.
int64_t Rss() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

// A call in flight, answered on gRPC's thread.
template <typename Response>
struct Call {
  grpc::ClientContext ctx;
  Response response;
  grpc::Status status;
  absl::Time answered;
  bool done = false;
};

class BurstTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_ = absl::StrCat(::testing::TempDir(), "/burst-tokens-", getpid(), ".json");
    std::ofstream(tokens_) << absl::StrCat(R"({"tokens": [{"token": ")", kAliceToken, R"(", "tenant": "alice"}, )",
                                           R"({"token": ")", kBobToken, R"(", "tenant": "bob"}]})");
    chmod(tokens_.c_str(), 0600);
  }
  void TearDown() override {
    if (daemon_) daemon_->Shutdown(absl::Seconds(10));
    unlink(tokens_.c_str());
  }

  // A small pool of Python workers warming nothing (quick to start), the
  // quotas raised to hold the bursts; everything else the defaults.
  DaemonOptions Options() {
    DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.allow_insecure_loopback = true;
    options.auth.tokens_file = tokens_;
    options.pools = {{"python", 2, {}}, {"javascript", 0, {}}, {"bash", 0, {}}};
    options.executor.host_id_base = static_cast<uid_t>(11'000'000 + (getpid() % 4096) * 512);
    options.executor.host_id_count = 512;
    options.sessions.max_per_tenant = 2000;
    options.sessions.max_total = 2000;
    options.shutdown_grace_ms = 5'000;
    return options;
  }
  void Start(const DaemonOptions& options) {
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    ASSERT_TRUE(daemon_->Start().ok());
    // Several connections, as many clients would open.
    for (int i = 0; i < 4; ++i) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      stubs_.push_back(Executor::NewStub(
          grpc::CreateCustomChannel(daemon_->listening().front(), grpc::InsecureChannelCredentials(), args)));
    }
    ASSERT_TRUE(WaitFor([&] { return daemon_->engine().Stats().pools["python"].ready == 2; }, absl::Seconds(60)));
  }
  Executor::Stub& stub(int i = 0) { return *stubs_[i % stubs_.size()]; }

  // `n` CreateSession calls at once as `token`, each with `deadline`.
  std::vector<std::unique_ptr<Call<v1::Session>>> CreateMany(int n, const std::string& token, absl::Duration deadline,
                                                              const v1::CreateSessionRequest& request = {}) {
    std::vector<std::unique_ptr<Call<v1::Session>>> calls;
    for (int i = 0; i < n; ++i) {
      auto call = std::make_unique<Call<v1::Session>>();
      call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
      call->ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
      Call<v1::Session>* c = call.get();
      stub(i).async()->CreateSession(&c->ctx, &request, &c->response, [this, c](grpc::Status s) {
        absl::MutexLock lock(&mu_);
        c->status = std::move(s);
        c->answered = absl::Now();
        c->done = true;
      });
      calls.push_back(std::move(call));
    }
    return calls;
  }
  template <typename T>
  bool AllDone(const std::vector<std::unique_ptr<Call<T>>>& calls, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& c : calls) {
        if (!c->done) return false;
      }
      return true;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
  void CloseAll(const std::vector<std::unique_ptr<Call<v1::Session>>>& calls, const std::string& token) {
    for (const auto& c : calls) {
      if (!c->status.ok()) continue;
      grpc::ClientContext ctx;
      ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
      v1::CloseSessionRequest close;
      close.set_session_id(c->response.id());
      v1::CloseSessionResponse closed;
      EXPECT_TRUE(stub().CloseSession(&ctx, close, &closed).ok());
    }
  }

  std::string tokens_;
  std::unique_ptr<Daemon> daemon_;
  std::vector<std::unique_ptr<Executor::Stub>> stubs_;
  absl::Mutex mu_;
};

TEST_F(BurstTest, ABurstOfSessionsWithinTheQuotaIsServedWholeNoneRefused) {
  // The field check's case in small: more at once than the old queue depth
  // (64) and the two warm workers together, on the default queue settings.
  Start(Options());
  constexpr int kBurst = 100;
  auto calls = CreateMany(kBurst, kAliceToken, absl::Minutes(5));
  ASSERT_TRUE(AllDone(calls, absl::Minutes(5)));
  std::set<std::string> ids;
  for (const auto& c : calls) {
    ASSERT_TRUE(c->status.ok()) << c->status.error_code() << ": " << c->status.error_message();
    ids.insert(c->response.id());
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kBurst));
  const WarmPoolStats pool = daemon_->engine().Stats().pools["python"];
  EXPECT_EQ(pool.refused_full + pool.refused_late + pool.timed_out, 0);
  EXPECT_GT(pool.misses, kBurst / 2) << "the burst waited for workers";
  // Every session answers its first cell.
  for (int i = 0; i < kBurst; i += 10) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kAliceToken));
    v1::ExecuteRequest cell;
    cell.set_session_id(calls[i]->response.id());
    cell.set_code("x = 1\nx + 1");
    v1::ExecuteResponse r;
    ASSERT_TRUE(stub().Execute(&ctx, cell, &r).ok());
    EXPECT_EQ(r.results(0).data().at("text/plain"), "2");
  }
  CloseAll(calls, kAliceToken);
}

TEST_F(BurstTest, AnotherTenantsSessionIsServedAfterOneTurnNotAfterTheBurst) {
  Start(Options());
  constexpr int kBurst = 60;
  auto alice = CreateMany(kBurst, kAliceToken, absl::Minutes(5));
  // The burst has reached the pool's line before bob asks.
  ASSERT_TRUE(WaitFor([&] { return daemon_->engine().Stats().pools["python"].waiting >= kBurst / 2; },
                      absl::Seconds(60)));
  // Sessions the engine has made, counted where they are made (a client's
  // own count lags behind under load).
  auto made = [&] { return daemon_->engine().Stats().sessions; };
  const int before = made();
  auto bob = CreateMany(1, kBobToken, absl::Minutes(5));
  ASSERT_TRUE(AllDone(bob, absl::Minutes(2)));
  const int alices_meanwhile = made() - before - 1;
  ASSERT_TRUE(bob[0]->status.ok()) << bob[0]->status.error_message();
  // In turn: the workers starting when bob joined, and alice's one turn.
  EXPECT_LE(alices_meanwhile, 6) << "bob waited behind alice's burst (" << before << " of hers had been made)";
  ASSERT_TRUE(AllDone(alice, absl::Minutes(5)));
  for (const auto& c : alice) EXPECT_TRUE(c->status.ok()) << c->status.error_message();
  CloseAll(alice, kAliceToken);
  CloseAll(bob, kBobToken);
}

TEST_F(BurstTest, WhatCannotBeServedBeforeItsDeadlineIsRefusedAtOnceSayingWhenToRetry) {
  Start(Options());
  // A first burst the pool measures its start rate on, under whatever load
  // this machine has now (a pool measures its idle refills otherwise, which
  // may be far faster than its starts under a burst).
  constexpr int kWarmup = 40;
  absl::Duration warmup_took;
  {
    const absl::Time warmup_start = absl::Now();
    auto warmup = CreateMany(kWarmup, kAliceToken, absl::Minutes(5));
    ASSERT_TRUE(AllDone(warmup, absl::Minutes(5)));
    warmup_took = absl::Now() - warmup_start;
    for (const auto& c : warmup) ASSERT_TRUE(c->status.ok()) << c->status.error_message();
    CloseAll(warmup, kAliceToken);
  }
  const int64_t late_before = daemon_->engine().Stats().pools["python"].refused_late;
  // Far more than this machine's starts can serve in 1.5 s: four times what
  // the warm-up's rate would serve (a fast machine made 40 in 0.23 s, and
  // 300 were no longer too many), at least 300.
  constexpr absl::Duration kDeadline = absl::Milliseconds(1500);
  const double rate = kWarmup / std::max(absl::ToDoubleSeconds(warmup_took), 0.01);
  const int kBurst = std::clamp(static_cast<int>(4 * rate * absl::ToDoubleSeconds(kDeadline)), 300, 1800);
  const absl::Time start = absl::Now();
  auto calls = CreateMany(kBurst, kAliceToken, kDeadline);
  ASSERT_TRUE(AllDone(calls, absl::Minutes(2)));
  int served = 0, refused_at_once = 0;
  for (const auto& c : calls) {
    if (c->status.ok()) {
      ++served;
      continue;
    }
    if (absl::StrContains(c->status.error_message(), "past your deadline")) {
      ++refused_at_once;
      EXPECT_EQ(c->status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
      EXPECT_TRUE(absl::StrContains(c->status.error_message(), "retry in about")) << c->status.error_message();
      EXPECT_LT(c->answered - start, kDeadline) << "refused before its deadline, not at it";
    } else {
      // Estimated in time but not served: its deadline came (the client's,
      // or the server's own refusal at it).
      EXPECT_TRUE(c->status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                  c->status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED)
          << c->status.error_code() << ": " << c->status.error_message();
    }
  }
  std::printf("warm-up: %d sessions in %.0f ms; burst of %d: %d served, %d refused at once, %d waited in vain\n",
              kWarmup, absl::ToDoubleMilliseconds(warmup_took), kBurst, served, refused_at_once,
              kBurst - served - refused_at_once);
  EXPECT_GT(served, 0);
  // Some of what was not served was refused at once. How many depends on
  // how well the line's recent rate foretells its next starts: beside two
  // CPU hogs 152 were served, 56 refused at once and 92 waited in vain, so
  // the share is the bench's to show, not this test's to bound.
  EXPECT_GT(refused_at_once, 0) << served << " served";
  EXPECT_EQ(daemon_->engine().Stats().pools["python"].refused_late - late_before, refused_at_once);
  CloseAll(calls, kAliceToken);
}

TEST_F(BurstTest, ThousandsWaitingForTheirTurnHoldNoThreadEach) {
  DaemonOptions options = Options();
  options.max_concurrent_per_tenant = 1;
  options.queue.max_waiting_per_tenant = 5000;
  Start(options);
  auto create = CreateMany(2, kAliceToken, absl::Minutes(1));
  ASSERT_TRUE(AllDone(create, absl::Minutes(1)));
  ASSERT_TRUE(create[0]->status.ok() && create[1]->status.ok());
  const std::string busy = create[0]->response.id(), idle = create[1]->response.id();
  // The tenant's one turn is held by a cell that runs until interrupted.
  Call<v1::ExecuteResponse> sleeper;
  sleeper.ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kAliceToken));
  v1::ExecuteRequest sleep;
  sleep.set_session_id(busy);
  sleep.set_code("import time\ntime.sleep(600)");
  stub().async()->Execute(&sleeper.ctx, &sleep, &sleeper.response, [&](grpc::Status s) {
    absl::MutexLock lock(&mu_);
    sleeper.status = s;
    sleeper.done = true;
  });
  ASSERT_TRUE(WaitFor([&] { return daemon_->engine().Stats().executing == 1; }, absl::Seconds(60)));
  absl::SleepFor(absl::Milliseconds(200));
  const int threads_before = Threads();
  const int64_t rss_before = Rss();
  constexpr int kWaiting = 2000;
  v1::ExecuteRequest cell;
  cell.set_session_id(idle);
  cell.set_code("x = 1");
  std::vector<std::unique_ptr<Call<v1::ExecuteResponse>>> cells;
  for (int i = 0; i < kWaiting; ++i) {
    auto call = std::make_unique<Call<v1::ExecuteResponse>>();
    call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Minutes(5)));
    call->ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kAliceToken));
    Call<v1::ExecuteResponse>* c = call.get();
    stub(i).async()->Execute(&c->ctx, &cell, &c->response, [this, c](grpc::Status s) {
      absl::MutexLock lock(&mu_);
      c->status = std::move(s);
      c->done = true;
    });
    cells.push_back(std::move(call));
  }
  ASSERT_TRUE(WaitFor([&] { return daemon_->engine().Stats().admission.waiting == kWaiting; }, absl::Seconds(60)))
      << daemon_->engine().Stats().admission.waiting << " wait";
  absl::SleepFor(absl::Milliseconds(200));
  const int threads_waiting = Threads();
  const int64_t rss_waiting = Rss();
  // This process is the client too: its calls' memory counts here as well.
  std::printf("%d requests waiting: %d more threads in the process, %.1f KiB more resident each (the client's "
              "calls and gRPC's on both sides included)\n",
              kWaiting, threads_waiting - threads_before,
              static_cast<double>(rss_waiting - rss_before) / kWaiting / 1024);
  EXPECT_LT(threads_waiting - threads_before, 100) << "a thread per waiting request";
  // The turn comes back: every one of them runs, in the order they came.
  grpc::ClientContext interrupt_ctx;
  interrupt_ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kAliceToken));
  v1::InterruptSessionRequest interrupt;
  interrupt.set_session_id(busy);
  v1::InterruptSessionResponse interrupted;
  ASSERT_TRUE(stub().InterruptSession(&interrupt_ctx, interrupt, &interrupted).ok());
  ASSERT_TRUE(AllDone(cells, absl::Minutes(4)));
  int ok = 0;
  for (const auto& c : cells) ok += c->status.ok() && c->response.outcome() == v1::OUTCOME_OK;
  EXPECT_EQ(ok, kWaiting);
  EXPECT_EQ(daemon_->engine().Stats().admission.refused + daemon_->engine().Stats().admission.too_late, 0);
  CloseAll(create, kAliceToken);
}

TEST_F(BurstTest, MachinesStartAFewAtATimeAndAllAreServed) {
  // Sessions with a shared workspace (what the E2B front creates) start a
  // machine each, no pool holding them ready: one per core at once, the
  // rest in line.
  Start(Options());
  v1::CreateSessionRequest request;
  request.set_shared_workspace(true);
  constexpr int kBurst = 12;
  auto calls = CreateMany(kBurst, kAliceToken, absl::Minutes(5), request);
  int most_running = 0, most_waiting = 0;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  while (!AllDone(calls, absl::Milliseconds(5))) {
    const TenantQueueStats starts = daemon_->engine().Stats().starts;
    most_running = std::max(most_running, starts.running);
    most_waiting = std::max(most_waiting, starts.waiting);
  }
  for (const auto& c : calls) ASSERT_TRUE(c->status.ok()) << c->status.error_message();
  EXPECT_LE(most_running, cores);
  EXPECT_GT(most_waiting, 0) << "the burst never waited: nothing was tested";
  const TenantQueueStats starts = daemon_->engine().Stats().starts;
  EXPECT_EQ(starts.admitted, kBurst);
  EXPECT_EQ(starts.refused + starts.too_late + starts.timed_out, 0);
  CloseAll(calls, kAliceToken);
}

}  // namespace
}  // namespace warden
