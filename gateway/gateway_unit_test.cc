// The gateway's parts that need no network: placement, the route table,
// discovery from a list and from DNS (localhost), liveness, the
// configuration.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gateway/gateway.h"
#include "gateway/gateway_options.h"
#include "gateway/liveness.h"
#include "gateway/node_source.h"
#include "gateway/placement.h"
#include "gateway/routes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "warden/v1/executor.pb.h"

namespace warden::gateway {
namespace {

using ::testing::HasSubstr;

v1::NodeStatus Loaded(int executing, int live, double cpu_idle = 1.0) {
  v1::NodeStatus status;
  status.mutable_capacity()->set_cpus(2);
  status.mutable_capacity()->set_max_sessions(1000);
  status.mutable_capacity()->set_memory_bytes(24LL << 30);
  status.mutable_load()->set_executing(executing);
  status.mutable_load()->set_sessions(live);
  status.mutable_load()->set_live_sandboxes(live);
  status.mutable_load()->set_memory_committed_bytes(live * (512LL << 20));
  status.mutable_load()->set_cpu_idle(cpu_idle);
  return status;
}

TEST(PlacementTest, BusyScoresMoreWorkAndFewerIdleCpusHigher) {
  EXPECT_LT(BusyScore(Loaded(0, 0), 0), BusyScore(Loaded(2, 0), 0));
  EXPECT_LT(BusyScore(Loaded(0, 0), 0), BusyScore(Loaded(0, 0), 3)) << "the gateway's own calls in flight count";
  EXPECT_LT(BusyScore(Loaded(1, 0, 0.9), 0), BusyScore(Loaded(1, 0, 0.1), 0));
  v1::NodeStatus queued = Loaded(2, 0);
  queued.mutable_load()->set_queued(6);
  EXPECT_DOUBLE_EQ(BusyScore(queued, 0), 4.0);
}

TEST(PlacementTest, HeldCountsSessionsLiveSandboxesAndMemoryAgainstWhatTheNodeMayHold) {
  v1::NodeStatus status = Loaded(0, 0);
  EXPECT_EQ(HeldScore(status, 0), 0);
  status.mutable_load()->set_sessions(100);  // all hibernated: no memory committed reported
  EXPECT_DOUBLE_EQ(HeldScore(status, 0), 0.1);
  EXPECT_DOUBLE_EQ(HeldScore(status, 100), 0.2) << "sessions placed since the report count";
  status.mutable_capacity()->set_max_live(50);
  status.mutable_load()->set_live_sandboxes(25);
  EXPECT_DOUBLE_EQ(HeldScore(status, 0), 0.5) << "live sandboxes against sessions.max_live";
  // 100 sessions of 512 MiB on 24 GiB: memory is what binds first.
  status.mutable_load()->set_memory_committed_bytes(100 * (512LL << 20));
  EXPECT_NEAR(HeldScore(status, 0), 100.0 / 48, 1e-9);
  EXPECT_NEAR(HeldScore(status, 20), 120.0 / 48, 1e-9) << "placed ones at the node's mean limit";
}

// A gateway placing `n` sessions on `nodes` one after the other, its view
// of each node refreshed every `report_every` placements (the polls lag the
// placements in a burst), with what it placed since counted; each report's
// CPU idleness is noise (the nodes of a test share one machine).
std::vector<int> PlaceSessions(std::vector<v1::NodeStatus> nodes, int n, int report_every, absl::BitGenRef rng) {
  std::vector<int> placed(nodes.size(), 0), since(nodes.size(), 0);
  std::vector<v1::NodeStatus> seen = nodes;
  for (int i = 0; i < n; ++i) {
    if (i % report_every == 0) {
      for (size_t k = 0; k < nodes.size(); ++k) {
        seen[k] = nodes[k];
        seen[k].mutable_load()->set_cpu_idle(absl::Uniform(rng, 0.0, 1.0));
        since[k] = 0;
      }
    }
    std::vector<NodeView> views;
    for (size_t k = 0; k < nodes.size(); ++k) views.push_back({seen[k], 0, since[k]});
    const int at = PickBestOfK(PlacementScores(views, Placing::kSession), 2, rng);
    ++placed[at];
    ++since[at];
    v1::NodeLoad* load = nodes[at].mutable_load();
    load->set_sessions(load->sessions() + 1);
    load->set_live_sandboxes(load->live_sandboxes() + 1);
    load->set_memory_committed_bytes(load->memory_committed_bytes() + (512LL << 20));
  }
  return placed;
}

// The spreads below are of fixed random sequences (seeded), so that each
// assertion about a distribution holds or fails the same way every run.
TEST(PlacementTest, SessionsSpreadEvenlyFromStaleReportsAndNoisyCpus) {
  std::mt19937_64 rng(28);
  for (int run = 0; run < 20; ++run) {
    const std::vector<int> placed = PlaceSessions({Loaded(0, 0), Loaded(0, 0), Loaded(0, 0)}, 300, 25, rng);
    for (int count : placed) {
      EXPECT_GE(count, 90) << placed[0] << "/" << placed[1] << "/" << placed[2];
      EXPECT_LE(count, 110) << placed[0] << "/" << placed[1] << "/" << placed[2];
    }
  }
  // Twelve, as the field check placed them (it saw 1/8/3). Best of two is
  // not best of all: a node left out of several pairs in a row trails (one
  // run in a few thousand ends 6/5/1), but nearly always each holds 3-5.
  int even = 0;
  constexpr int kRuns = 1000;
  for (int run = 0; run < kRuns; ++run) {
    const std::vector<int> placed = PlaceSessions({Loaded(0, 0), Loaded(0, 0), Loaded(0, 0)}, 12, 4, rng);
    even += *std::min_element(placed.begin(), placed.end()) >= 3 && *std::max_element(placed.begin(), placed.end()) <= 5;
  }
  EXPECT_GE(even, kRuns * 97 / 100);
}

TEST(PlacementTest, NewSessionsFillTheNodeThatHoldsLeast) {
  std::mt19937_64 rng(28);
  // One node came back empty beside two holding 100 each: it wins every
  // pair it is in (two thirds of them) until it has caught up.
  const std::vector<int> placed = PlaceSessions({Loaded(0, 100), Loaded(0, 100), Loaded(0, 0)}, 150, 10, rng);
  EXPECT_GE(placed[2], 85) << placed[0] << "/" << placed[1] << "/" << placed[2];
  EXPECT_LE(placed[0], 35) << placed[0] << "/" << placed[1] << "/" << placed[2];
  EXPECT_LE(placed[1], 35) << placed[0] << "/" << placed[1] << "/" << placed[2];
}

TEST(PlacementTest, ABusyNodeTakesFewerSessionsWhileBusyButWhatNodesHoldStaysClose) {
  std::mt19937_64 rng(28);
  // Every CPU of the first node runs two cells and more wait.
  v1::NodeStatus busy = Loaded(4, 100);
  busy.mutable_load()->set_queued(4);
  const std::vector<int> placed = PlaceSessions({busy, Loaded(0, 100), Loaded(0, 100)}, 300, 25, rng);
  EXPECT_LT(placed[0], placed[1]);
  EXPECT_LT(placed[0], placed[2]);
  // About a fifth of the mean held less, no more: 100 + placed within 20% of the others.
  EXPECT_GE(100 + placed[0], 0.75 * (100 + (placed[1] + placed[2]) / 2.0))
      << placed[0] << "/" << placed[1] << "/" << placed[2];
  // On an empty fleet, the idle nodes win.
  const std::vector<int> fresh = PlaceSessions({busy, Loaded(0, 0), Loaded(0, 0)}, 1, 1, rng);
  EXPECT_EQ(fresh[0], 0);
}

TEST(PlacementTest, OneShotsGoWhereLeastWorkRunsNow) {
  const std::vector<NodeView> views = {{Loaded(6, 10), 0, 0}, {Loaded(0, 200), 0, 0}, {Loaded(1, 10), 0, 0}};
  const std::vector<double> work = PlacementScores(views, Placing::kWork);
  EXPECT_GT(work[0], work[2]);
  EXPECT_GT(work[0], work[1]) << "6 cells on 2 CPUs outweigh what a node holds";
  const std::vector<double> held = PlacementScores(views, Placing::kSession);
  EXPECT_GT(held[1], held[0]) << "for a session, 200 held outweigh the moment's cells";
}

TEST(PlacementTest, BestOfTwoNeverPicksTheWorstAndSpreadsOverTheRest) {
  absl::BitGen rng;
  const std::vector<double> scores = {5.0, 1.0, 3.0, 9.0};
  std::map<int, int> picked;
  for (int i = 0; i < 4000; ++i) ++picked[PickBestOfK(scores, 2, rng)];
  EXPECT_EQ(picked[3], 0) << "the worst of four loses every pair it is in";
  EXPECT_GT(picked[1], picked[2]);
  EXPECT_GT(picked[2], picked[0]);
  EXPECT_GT(picked[0], 0) << "random pairs reach every node but the worst";
}

TEST(PlacementTest, BestOfAllIsTheMinimumAndEmptyIsNone) {
  absl::BitGen rng;
  EXPECT_EQ(PickBestOfK({4, 2, 7}, 16, rng), 1);
  EXPECT_EQ(PickBestOfK({}, 2, rng), -1);
  EXPECT_EQ(PickBestOfK({3}, 2, rng), 0);
}

TEST(RoutesTest, EveryMethodOfTheApiHasARoute) {
  auto routes = BuildRoutes();
  ASSERT_TRUE(routes.ok()) << routes.status();
  for (const google::protobuf::ServiceDescriptor* service :
       {v1::ExecuteRequest::descriptor()->file()->FindServiceByName("Executor")}) {
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string path = "/warden.v1.Executor/" + service->method(i)->name();
      ASSERT_TRUE(routes->count(path)) << path;
      const Route& route = routes->at(path);
      if (route.kind == Route::Kind::kSession) {
        EXPECT_FALSE(route.session_field.empty()) << path << " routes by a session it must name";
      }
    }
  }
  EXPECT_EQ(routes->at("/warden.v1.Executor/Execute").kind, Route::Kind::kExecute);
  EXPECT_EQ(routes->at("/warden.v1.Executor/CreateSession").kind, Route::Kind::kPlace);
  EXPECT_EQ(routes->at("/warden.v1.Executor/ListSessions").kind, Route::Kind::kFanOut);
  EXPECT_EQ(routes->at("/warden.v1.Executor/ForkSession").kind, Route::Kind::kSession);
  EXPECT_EQ(routes->at("/warden.v1.Agent/Run").kind, Route::Kind::kPlace);
  EXPECT_EQ(routes->at("/warden.v1.Node/TakeOverSession").kind, Route::Kind::kRefused);
}

TEST(RoutesTest, FindsTheSessionInANestedHeader) {
  auto routes = BuildRoutes();
  ASSERT_TRUE(routes.ok());
  const Route& upload = routes->at("/warden.v1.Executor/UploadFile");
  v1::UploadFileRequest request;
  request.mutable_header()->set_session_id("s-0123456789abcdef01234567-n1");
  EXPECT_EQ(upload.SessionIdOf(request), "s-0123456789abcdef01234567-n1");
  EXPECT_EQ(upload.SessionIdOf(v1::UploadFileRequest()), "");
  v1::ExecuteRequest one_shot;
  EXPECT_EQ(routes->at("/warden.v1.Executor/Execute").SessionIdOf(one_shot), "");
}

TEST(NodeSourceTest, AStaticListIsSorted) {
  auto source = StaticNodes({"10.0.0.3:7000", "10.0.0.1:7000"});
  auto nodes = source->Resolve();
  ASSERT_TRUE(nodes.ok());
  EXPECT_THAT(*nodes, ::testing::ElementsAre("10.0.0.1:7000", "10.0.0.3:7000"));
}

TEST(NodeSourceTest, ADnsNameGivesEveryAddressWithThePort) {
  auto nodes = DnsNodes("localhost", 7000)->Resolve();
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_THAT(*nodes, ::testing::Contains("127.0.0.1:7000"));
  auto none = DnsNodes("no-such-node.invalid", 7000)->Resolve();
  EXPECT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("no-such-node.invalid"));
}

TEST(MovedSessionsTest, RemembersAndForgets) {
  MovedSessions moved(2);
  moved.Put("s-a", "n1");
  EXPECT_EQ(moved.Get("s-a"), "n1");
  moved.Forget("s-a");
  EXPECT_EQ(moved.Get("s-a"), "");
  moved.Put("s-a", "n1");
  moved.Put("s-b", "n2");
  moved.Put("s-c", "n3");  // past its capacity: it starts again
  EXPECT_EQ(moved.Get("s-c"), "n3");
  EXPECT_EQ(moved.Get("s-a"), "");
}

// A node polled as the directory polls it (an ask every interval, each
// failing `timeout` after it went while the node is silent), from t0; the
// node answers nothing from `silent_from` on, but its calls until
// `calls_until`. When the gateway counted it down (InfiniteFuture: not
// within a minute), and when it last heard from it then.
const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);

struct Verdict {
  absl::Time down = absl::InfiniteFuture();
  absl::Time last_heard;
};

Verdict Poll(absl::Duration silent_from, absl::Duration calls_until = absl::ZeroDuration()) {
  const GatewayOptions options;
  const absl::Duration interval = absl::Milliseconds(options.nodes.poll_interval_ms);
  const absl::Duration timeout = absl::Milliseconds(options.nodes.poll_timeout_ms);
  Liveness node(options.nodes.down_after);
  std::map<absl::Time, absl::Time> failing;  // fails at -> sent at
  for (absl::Duration now; now < absl::Minutes(1); now += absl::Milliseconds(10)) {
    const absl::Time t = t0 + now;
    if (now < calls_until && now >= silent_from) node.Heard(t);  // a proxied call's answer
    for (auto it = failing.begin(); it != failing.end() && it->first <= t;) {
      if (node.Failed(it->second, t, /*unreachable=*/false, "deadline exceeded")) return {t, node.last_heard()};
      it = failing.erase(it);
    }
    if (now % interval != absl::ZeroDuration()) continue;
    if (now < silent_from) {
      node.Answered(t + absl::Milliseconds(5));
    } else {
      failing[t + timeout] = t;
    }
  }
  return {absl::InfiniteFuture(), node.last_heard()};
}

absl::Duration DefaultBound() {
  const GatewayOptions defaults;
  return DetectionBound(defaults.nodes.poll_interval_ms, defaults.nodes.poll_timeout_ms, defaults.nodes.down_after);
}

TEST(LivenessTest, ASilentNodeIsDownWithinTheBoundOfTheLastThingItSaid) {
  // The goal (docs/fleet.md): a node lost is noticed within 5 s; the
  // defaults leave half of it for a loaded machine's late timers.
  EXPECT_LE(DefaultBound(), absl::Milliseconds(2500));
  const GatewayOptions defaults;
  const absl::Duration least_silence = absl::Milliseconds(
      defaults.nodes.poll_timeout_ms + (defaults.nodes.down_after - 1) * defaults.nodes.poll_interval_ms);
  // Silent from every point of an interval.
  for (int ms = 0; ms < 1000; ms += 50) {
    const absl::Duration silent_from = absl::Seconds(3) + absl::Milliseconds(ms);
    const Verdict verdict = Poll(silent_from);
    ASSERT_NE(verdict.down, absl::InfiniteFuture()) << ms;
    EXPECT_LT(verdict.last_heard, t0 + silent_from) << ms;
    EXPECT_LE(verdict.down - verdict.last_heard, DefaultBound()) << ms;
    EXPECT_GE(verdict.down - (t0 + silent_from), least_silence) << ms << ": taken for lost too soon";
  }
}

TEST(LivenessTest, ANodeSlowToAnswerItsAsksButAnsweringCallsStaysUp) {
  // Its asks time out from 3 s on, its calls go on: never down; once the
  // calls stop too, down within the bound of the last.
  EXPECT_EQ(Poll(absl::Seconds(3), absl::Seconds(61)).down, absl::InfiniteFuture());
  const Verdict verdict = Poll(absl::Seconds(3), absl::Seconds(20));
  EXPECT_GT(verdict.down, t0 + absl::Seconds(20));
  EXPECT_LE(verdict.down - verdict.last_heard, DefaultBound());
}

TEST(LivenessTest, ARefusedConnectionIsDownAtOnceAndAnAnswerBringsItBack) {
  Liveness node(3);
  EXPECT_FALSE(node.up());
  EXPECT_FALSE(node.Failed(t0, t0, /*unreachable=*/true, "not yet up"));  // never up: nothing to go down
  node.Answered(t0);
  EXPECT_TRUE(node.up());
  EXPECT_TRUE(node.Failed(t0 + absl::Seconds(1), t0 + absl::Seconds(1), /*unreachable=*/true, "connection refused"));
  EXPECT_FALSE(node.up());
  EXPECT_EQ(node.down_since(), t0 + absl::Seconds(1));
  EXPECT_EQ(node.down_reason(), "connection refused");
  node.Heard(t0 + absl::Seconds(2));  // a late answer of a call does not bring it back
  EXPECT_FALSE(node.up());
  node.Answered(t0 + absl::Seconds(3));
  EXPECT_TRUE(node.up());
}

class OptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gateway_options_test.XXXXXX";
    dir_ = mkdtemp(pattern);
    for (const char* name : {"cert.pem", "key.pem", "ca.pem"}) std::ofstream(dir_ + "/" + name) << "x";
    std::ofstream(dir_ + "/tokens.json") << "{}";
    chmod((dir_ + "/tokens.json").c_str(), 0600);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& text) {
    const std::string path = dir_ + "/gateway.json";
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(OptionsTest, ReadsEveryKeyAndRefusesUnknownOnes) {
  auto options = GatewayOptions::FromFile(Write(R"({"listen": ["127.0.0.1:0"], "allow_insecure_loopback": true,
      "auth": {"tokens_file": ")" + dir_ + R"(/tokens.json"},
      "nodes": {"dns": "tasks.wardend", "port": 7443, "cert_file": ")" + dir_ + R"(/cert.pem",
                "key_file": ")" + dir_ + R"(/key.pem", "ca_file": ")" + dir_ + R"(/ca.pem", "server_name": "wardend"},
      "placement": {"choices": 3},
      "http": {"allowed_origins": ["https://app.example"], "max_connections": 20000, "idle_timeout_ms": 5000}})"));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->nodes.dns, "tasks.wardend");
  EXPECT_EQ(options->nodes.port, 7443);
  EXPECT_EQ(options->placement.choices, 3);
  // The http section is wardend's: the same keys, the same defaults.
  EXPECT_EQ(options->http.allowed_origins, std::vector<std::string>{"https://app.example"});
  EXPECT_EQ(options->http.max_connections, 20000);
  EXPECT_EQ(options->http.idle_timeout_ms, 5000);
  EXPECT_EQ(options->http.head_timeout_ms, fronts::HttpSettings().head_timeout_ms);
  EXPECT_TRUE(options->Validate().ok()) << options->Validate();

  auto typo = GatewayOptions::FromFile(Write(R"({"nodes": {"dsn": "x"}})"));
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(std::string(typo.status().message()), HasSubstr("Did you mean 'dns'?"));
}

TEST_F(OptionsTest, NeedsNodesTheirCertificateAndTokens) {
  GatewayOptions options;
  options.allow_insecure_loopback = true;
  const std::string problems(options.Validate().message());
  EXPECT_THAT(problems, HasSubstr("nodes.dns"));
  EXPECT_THAT(problems, HasSubstr("mutual TLS"));
  EXPECT_THAT(problems, HasSubstr("auth.tokens_file"));
  options.nodes.dns = "tasks.wardend";
  options.nodes.addresses = {"10.0.0.1:7000"};
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("not both"));
}

TEST_F(OptionsTest, TheHttpSectionIsCheckedAsWardendsIs) {
  GatewayOptions options;
  options.http.allowed_origins = {"*"};
  options.http.max_connections = 0;
  const std::string problems(options.Validate().message());
  EXPECT_THAT(problems, HasSubstr("http.allowed_origins"));
  EXPECT_THAT(problems, HasSubstr("http.max_connections is 0"));
}

}  // namespace
}  // namespace warden::gateway
