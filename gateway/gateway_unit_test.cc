// The gateway's parts that need no network: placement, the route table,
// discovery from a list and from DNS (localhost), the configuration.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "gateway/gateway.h"
#include "gateway/gateway_options.h"
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
  status.mutable_load()->set_executing(executing);
  status.mutable_load()->set_live_sandboxes(live);
  status.mutable_load()->set_cpu_idle(cpu_idle);
  return status;
}

TEST(PlacementTest, ScoresMoreWorkAndFewerIdleCpusHigher) {
  EXPECT_LT(LoadScore(Loaded(0, 0), 0), LoadScore(Loaded(2, 0), 0));
  EXPECT_LT(LoadScore(Loaded(0, 0), 0), LoadScore(Loaded(0, 0), 3)) << "the gateway's own calls in flight count";
  EXPECT_LT(LoadScore(Loaded(0, 10), 0), LoadScore(Loaded(0, 500), 0));
  EXPECT_LT(LoadScore(Loaded(1, 0, 0.9), 0), LoadScore(Loaded(1, 0, 0.1), 0));
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
      "placement": {"choices": 3}})"));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->nodes.dns, "tasks.wardend");
  EXPECT_EQ(options->nodes.port, 7443);
  EXPECT_EQ(options->placement.choices, 3);
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

}  // namespace
}  // namespace warden::gateway
