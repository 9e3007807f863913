#include "server/options.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace warden {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// A temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "/options_test.XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

absl::StatusOr<DaemonOptions> Parse(const std::string& json) {
  TempDir dir;
  return DaemonOptions::FromFile(dir.Write("wardend.json", json));
}

std::string ParseError(const std::string& json) {
  absl::StatusOr<DaemonOptions> options = Parse(json);
  EXPECT_FALSE(options.ok()) << json;
  return options.ok() ? "" : std::string(options.status().message());
}

// Every field FromFile can set, as JSON, so two DaemonOptions compare as a
// whole and a failure shows the difference.
nlohmann::json Dump(const DaemonOptions& o) {
  auto cell = [](const CellLimitsOptions& c) {
    return nlohmann::json{{"wall_ms", c.wall_ms},
                          {"cpu_ms", c.cpu_ms},
                          {"memory_mb", c.memory_mb},
                          {"output_bytes", c.output_bytes}};
  };
  auto policy = [](const NetworkPolicyOptions& n) {
    return nlohmann::json{{"allow_by_default", n.allow_by_default}, {"allow", n.allow}, {"deny", n.deny}};
  };
  auto ceiling = [&policy](const EgressCeilingOptions& c) {
    nlohmann::json out = policy(c.policy);
    out["session_secrets"] = c.session_secrets;
    out["max_bytes_per_session"] = c.max_bytes_per_session;
    out["max_connections_per_session"] = c.max_connections_per_session;
    return out;
  };
  nlohmann::json pools = nlohmann::json::array();
  for (const PoolOptions& p : o.pools) {
    pools.push_back({{"language", p.language},
                     {"size", p.size},
                     {"warm", p.warm},
                     {"memory_mb", p.memory_mb},
                     {"max_size", p.max_size},
                     {"wheelhouse", p.wheelhouse},
                     {"network", policy(p.network)}});
  }
  nlohmann::json tenants = nlohmann::json::object();
  for (const auto& [tenant, c] : o.egress.tenants) tenants[tenant] = ceiling(c);
  nlohmann::json secrets = nlohmann::json::array();
  for (const EgressSecretOptions& s : o.egress.secrets) {
    secrets.push_back({{"name", s.name}, {"value_file", s.value_file}, {"hosts", s.hosts}, {"tenants", s.tenants}});
  }
  return {
      {"listen", o.listen},
      {"allow_insecure_loopback", o.allow_insecure_loopback},
      {"admin_listen", o.admin_listen},
      {"http_listen", o.http_listen},
      {"http",
       {{"allowed_hosts", o.http.allowed_hosts},
        {"allowed_origins", o.http.allowed_origins},
        {"head_timeout_ms", o.http.head_timeout_ms},
        {"idle_timeout_ms", o.http.idle_timeout_ms},
        {"max_connections", o.http.max_connections},
        {"max_streams_per_tenant", o.http.max_streams_per_tenant},
        {"io_threads", o.http.io_threads},
        {"handler_threads", o.http.handler_threads},
        {"sandbox_domain", o.http.sandbox_domain},
        {"allow_public_ports", o.http.allow_public_ports}}},
      {"tls",
       {{"cert_file", o.tls.cert_file},
        {"key_file", o.tls.key_file},
        {"client_ca_file", o.tls.client_ca_file}}},
      {"auth", {{"tokens_file", o.auth.tokens_file}}},
      {"limits",
       {{"defaults", cell(o.limits.defaults)},
        {"max", cell(o.limits.max)},
        {"max_code_bytes", o.limits.max_code_bytes},
        {"max_file_bytes", o.limits.max_file_bytes},
        {"pids", o.limits.pids},
        {"tmpfs_mb", o.limits.tmpfs_mb}}},
      {"sessions",
       {{"max_total", o.sessions.max_total},
        {"max_per_tenant", o.sessions.max_per_tenant},
        {"default_ttl_seconds", o.sessions.default_ttl_seconds},
        {"max_ttl_seconds", o.sessions.max_ttl_seconds},
        {"default_idle_timeout_seconds", o.sessions.default_idle_timeout_seconds}}},
      {"pools", pools},
      {"queue",
       {{"max_depth", o.queue.max_depth},
        {"max_wait_ms", o.queue.max_wait_ms},
        {"max_waiting_per_tenant", o.queue.max_waiting_per_tenant},
        {"max_running", o.queue.max_running}}},
      {"max_concurrent_per_tenant", o.max_concurrent_per_tenant},
      {"shutdown_grace_ms", o.shutdown_grace_ms},
      {"keep_sessions", o.keep_sessions},
      {"log", {{"format", o.log.format}, {"level", o.log.level}}},
      {"executor",
       {{"allow_degraded", o.executor.allow_degraded},
        {"host_id_base", o.executor.host_id_base},
        {"host_id_count", o.executor.host_id_count}}},
      {"kernels_dir", o.kernels_dir},
      {"zygote", {{"enabled", o.zygote.enabled}, {"program", o.zygote.program}}},
      {"agent",
       {{"llm",
         {{"base_url", o.agent.llm.base_url},
          {"model", o.agent.llm.model},
          {"api_key_env", o.agent.llm.api_key_env},
          {"api_key_file", o.agent.llm.api_key_file},
          {"request_timeout_ms", o.agent.llm.request_timeout_ms},
          {"max_tokens", o.agent.llm.max_tokens},
          {"temperature", o.agent.llm.temperature},
          {"stream", o.agent.llm.stream},
          {"max_retries", o.agent.llm.max_retries},
          {"tools", o.agent.llm.tools},
          {"tool_choice", o.agent.llm.tool_choice}}},
        {"default_max_iterations", o.agent.default_max_iterations},
        {"max_iterations", o.agent.max_iterations},
        {"default_max_wall_ms", o.agent.default_max_wall_ms},
        {"max_wall_ms", o.agent.max_wall_ms},
        {"default_max_tokens", o.agent.default_max_tokens},
        {"max_tokens", o.agent.max_tokens},
        {"max_observation_bytes", o.agent.max_observation_bytes}}},
      {"state_dir", o.state_dir},
      {"socket_group", o.socket_group},
      {"fleet",
       {{"node_id", o.fleet.node_id},
        {"shared_dir", o.fleet.shared_dir},
        {"gateway_ca_file", o.fleet.gateway_ca_file},
        {"gateway_name", o.fleet.gateway_name},
        {"drain_wait_ms", o.fleet.drain_wait_ms}}},
      {"egress",
       {{"enabled", o.egress.enabled},
        {"hosts", o.egress.hosts.empty() ? nlohmann::json::object() : nlohmann::json(o.egress.hosts)},
        {"name_servers", o.egress.name_servers},
        {"allow_internal", o.egress.allow_internal},
        {"upstream_ca_file", o.egress.upstream_ca_file},
        {"sandbox_ca_files", o.egress.sandbox_ca_files},
        {"ca_cert_file", o.egress.ca_cert_file},
        {"ca_key_file", o.egress.ca_key_file},
        {"default_ceiling", ceiling(o.egress.default_ceiling)},
        {"tenants", tenants},
        {"secrets", secrets},
        {"max_connections_per_tenant", o.egress.max_connections_per_tenant},
        {"connect_timeout_ms", o.egress.connect_timeout_ms},
        {"idle_timeout_ms", o.egress.idle_timeout_ms},
        {"io_threads", o.egress.io_threads}}},
  };
}

// ---------------------------------------------------------------------------
// FromFile

TEST(DaemonOptionsTest, DefaultsValidate) {
  EXPECT_TRUE(DaemonOptions{}.Validate().ok()) << DaemonOptions{}.Validate();
}

TEST(FromFileTest, EmptyObjectKeepsEveryDefault) {
  absl::StatusOr<DaemonOptions> options = Parse("{}");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(Dump(*options), Dump(DaemonOptions{}));
}

// deploy/wardend.json documents the defaults by setting every key to one;
// it must stay exactly the built-in defaults, and name every key.
TEST(FromFileTest, ShippedConfigIsExactlyTheDefaults) {
  const std::string shipped =
      (std::filesystem::path(__FILE__).parent_path().parent_path() / "deploy" / "wardend.json")
          .string();
  absl::StatusOr<DaemonOptions> options = DaemonOptions::FromFile(shipped);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(Dump(*options), Dump(DaemonOptions{}));
  std::ifstream in(shipped);
  EXPECT_EQ(nlohmann::json::parse(in), Dump(DaemonOptions{}))
      << "deploy/wardend.json should set every key";
}

TEST(FromFileTest, FullConfigFillsEveryField) {
  const nlohmann::json full = {
      {"listen", {"unix:/run/w.sock", "[::1]:7001", "127.0.0.1:7000"}},
      {"allow_insecure_loopback", true},
      {"admin_listen", "127.0.0.1:9090"},
      {"http_listen", "127.0.0.1:8080"},
      {"http",
       {{"allowed_hosts", {"warden.internal"}},
        {"allowed_origins", {"https://app.example.com"}},
        {"head_timeout_ms", 37},
        {"idle_timeout_ms", 38},
        {"max_connections", 39},
        {"max_streams_per_tenant", 40},
        {"io_threads", 41},
        {"handler_threads", 42},
        {"sandbox_domain", "sandbox.example.com"},
        {"allow_public_ports", true}}},
      {"tls", {{"cert_file", "/c.pem"}, {"key_file", "/k.pem"}, {"client_ca_file", "/ca.pem"}}},
      {"auth", {{"tokens_file", "/etc/warden/tokens.json"}}},
      {"limits",
       {{"defaults", {{"wall_ms", 1}, {"cpu_ms", 2}, {"memory_mb", 3}, {"output_bytes", 4}}},
        {"max", {{"wall_ms", 5}, {"cpu_ms", 6}, {"memory_mb", 7}, {"output_bytes", 8}}},
        {"max_code_bytes", 9},
        {"max_file_bytes", 10},
        {"pids", 11},
        {"tmpfs_mb", 12}}},
      {"sessions",
       {{"max_total", 13},
        {"max_per_tenant", 14},
        {"default_ttl_seconds", 15},
        {"max_ttl_seconds", 16},
        {"default_idle_timeout_seconds", 17}}},
      {"pools",
       {{{"language", "bash"}, {"size", 18}, {"warm", nlohmann::json::array()}, {"memory_mb", 0},
         {"max_size", 0}, {"wheelhouse", ""},
         {"network", {{"allow_by_default", false}, {"allow", nlohmann::json::array()},
                      {"deny", nlohmann::json::array()}}}},
        {{"language", "python"}, {"size", 19}, {"warm", {"scipy", "sympy"}}, {"memory_mb", 7},
         {"max_size", 40}, {"wheelhouse", "/srv/wheels"},
         {"network", {{"allow_by_default", false}, {"allow", {"pypi.org", "*.pythonhosted.org"}},
                      {"deny", {"10.0.0.0/8"}}}}}}},
      {"queue", {{"max_depth", 20}, {"max_wait_ms", 21}, {"max_waiting_per_tenant", 35}, {"max_running", 36}}},
      {"max_concurrent_per_tenant", 22},
      {"shutdown_grace_ms", 23},
      {"keep_sessions", false},
      {"log", {{"format", "json"}, {"level", "debug"}}},
      {"executor", {{"allow_degraded", true}, {"host_id_base", 4000000000}, {"host_id_count", 24}}},
      {"kernels_dir", "/usr/lib/warden/kernels"},
      {"zygote", {{"enabled", false}, {"program", "/usr/lib/warden/warden-python-zygote"}}},
      {"agent",
       {{"llm",
         {{"base_url", "https://api.openai.com/v1"},
          {"model", "gpt-4o-mini"},
          {"api_key_env", ""},
          {"api_key_file", "/etc/warden/openai.key"},
          {"request_timeout_ms", 25},
          {"max_tokens", 26},
          {"temperature", 0.75},
          {"stream", false},
          {"max_retries", 27},
          {"tools", "native"},
          {"tool_choice", "execute_code"}}},
        {"default_max_iterations", 28},
        {"max_iterations", 29},
        {"default_max_wall_ms", 30},
        {"max_wall_ms", 31},
        {"default_max_tokens", 32},
        {"max_tokens", 33},
        {"max_observation_bytes", 34}}},
      {"state_dir", "/run/warden-test"},
      {"socket_group", "warden-test"},
      {"fleet",
       {{"node_id", "n-1"},
        {"shared_dir", "/srv/shared"},
        {"gateway_ca_file", "/gw-ca.pem"},
        {"gateway_name", "warden-gateway"},
        {"drain_wait_ms", 35}}},
      {"egress",
       {{"enabled", true},
        {"hosts", {{"pypi.internal", {"203.0.113.5"}}}},
        {"name_servers", {"192.0.2.53"}},
        {"allow_internal", {"10.1.0.0/16"}},
        {"upstream_ca_file", "/up-ca.pem"},
        {"sandbox_ca_files", {"/extra-ca.pem"}},
        {"ca_cert_file", "/egress-ca.pem"},
        {"ca_key_file", "/egress-ca.key"},
        {"io_threads", 43},
        {"connect_timeout_ms", 44},
        {"idle_timeout_ms", 45},
        {"max_connections_per_tenant", 46},
        {"default_ceiling",
         {{"allow_by_default", false}, {"allow", {"*"}}, {"deny", {"evil.example"}}, {"session_secrets", false},
          {"max_bytes_per_session", 47}, {"max_connections_per_session", 48}}},
        {"tenants",
         {{"team-a",
           {{"allow_by_default", false}, {"allow", {"api.example.com"}}, {"deny", nlohmann::json::array()},
            {"session_secrets", true}, {"max_bytes_per_session", 49}, {"max_connections_per_session", 50}}}}},
        {"secrets",
         {{{"name", "API_TOKEN"}, {"value_file", "/etc/warden/api.token"}, {"hosts", {"api.example.com"}},
           {"tenants", {"team-a"}}}}}}},
  };
  absl::StatusOr<DaemonOptions> options = Parse(full.dump(2));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(Dump(*options), full);
  // Spot checks on the structs themselves.
  EXPECT_THAT(options->listen, ElementsAre("unix:/run/w.sock", "[::1]:7001", "127.0.0.1:7000"));
  EXPECT_EQ(options->limits.max.output_bytes, 8);
  EXPECT_EQ(options->pools[1].warm, (std::vector<std::string>{"scipy", "sympy"}));
  EXPECT_EQ(options->executor.host_id_base, 4'000'000'000u);
  EXPECT_EQ(options->sessions.default_idle_timeout_seconds, 17);
}

TEST(FromFileTest, PartialSectionsKeepTheirOtherDefaults) {
  absl::StatusOr<DaemonOptions> options =
      Parse(R"({"limits": {"max": {"memory_mb": 8192}}, "log": {"level": "warn"}})");
  ASSERT_TRUE(options.ok()) << options.status();
  DaemonOptions expected;
  expected.limits.max.memory_mb = 8192;
  expected.log.level = "warn";
  EXPECT_EQ(Dump(*options), Dump(expected));
}

TEST(FromFileTest, PoolsReplaceTheDefaultsAndNeedALanguage) {
  absl::StatusOr<DaemonOptions> none = Parse(R"({"pools": []})");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->pools.empty());

  absl::StatusOr<DaemonOptions> one = Parse(R"({"pools": [{"language": "javascript"}]})");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->pools.size(), 1u);
  EXPECT_EQ(one->pools[0].language, "javascript");
  EXPECT_EQ(one->pools[0].size, PoolOptions{}.size);

  // Without a language the entry is not silently a python pool.
  absl::StatusOr<DaemonOptions> unnamed = Parse(R"({"pools": [{"size": 4}]})");
  ASSERT_TRUE(unnamed.ok()) << unnamed.status();
  EXPECT_THAT(std::string(unnamed->Validate().message()),
              HasSubstr("pools[0].language is ''; it must be python, javascript, bash, typescript, r or java"));
}

TEST(FromFileTest, ANumberTooLargeIsAnErrorNotACrash) {
  TempDir dir;
  const std::string file = dir.Write("wardend.json", R"({"shutdown_grace_ms": 1e99999})");
  absl::StatusOr<DaemonOptions> options = DaemonOptions::FromFile(file);
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(options.status().message()), HasSubstr("use a smaller number"));
}

TEST(FromFileTest, UnknownTopLevelKeyIsNamedWithTheKnownKeys) {
  TempDir dir;
  const std::string file = dir.Write("wardend.json", R"({"limts": {}})");
  absl::StatusOr<DaemonOptions> options = DaemonOptions::FromFile(file);
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(options.status().message()),
              AllOf(HasSubstr("unknown key 'limts' at the top level of " + file +
                              "; known keys: listen, allow_insecure_loopback, admin_listen, http_listen, http, tls, "
                              "auth, limits, sessions, snapshots, pools, templates, volumes, queue, max_concurrent_per_tenant, "
                              "shutdown_grace_ms, keep_sessions, log, executor, kernels_dir"),
                    HasSubstr("Did you mean 'limits'?")));
}

TEST(FromFileTest, UnknownNestedKeyIsNamedWithItsPath) {
  EXPECT_THAT(ParseError(R"({"limits": {"defaults": {"wal_ms": 5}}})"),
              AllOf(HasSubstr("unknown key 'wal_ms' in limits.defaults of "),
                    HasSubstr("known keys: wall_ms, cpu_ms, memory_mb, output_bytes"),
                    HasSubstr("Did you mean 'wall_ms'?")));
  EXPECT_THAT(ParseError(R"({"pools": [{"language": "bash"}, {"languge": "bash"}]})"),
              HasSubstr("unknown key 'languge' in pools[1] of "));
  // Far from every known key: no guess.
  EXPECT_THAT(
      ParseError(R"({"tls": {"zzzzzzzz": ""}})"),
      AllOf(HasSubstr("unknown key 'zzzzzzzz' in tls of "), Not(HasSubstr("Did you mean"))));
}

TEST(FromFileTest, WrongTypesNameThePathAndTheExpectedType) {
  EXPECT_THAT(ParseError(R"({"limits": {"defaults": {"wall_ms": "30s"}}})"),
              HasSubstr("limits.defaults.wall_ms in "));
  EXPECT_THAT(ParseError(R"({"limits": {"defaults": {"wall_ms": "30s"}}})"),
              HasSubstr(" must be an integer, not the string \"30s\""));
  EXPECT_THAT(ParseError(R"({"shutdown_grace_ms": 1.5})"), HasSubstr("shutdown_grace_ms in "));
  EXPECT_THAT(ParseError(R"({"shutdown_grace_ms": 1.5})"),
              HasSubstr("must be an integer, not the number 1.5"));
  EXPECT_THAT(ParseError(R"({"allow_insecure_loopback": "yes"})"),
              HasSubstr("allow_insecure_loopback in "));
  EXPECT_THAT(ParseError(R"({"allow_insecure_loopback": 1})"),
              HasSubstr("must be true or false, not the integer 1"));
  EXPECT_THAT(ParseError(R"({"listen": "unix:/run/w.sock"})"),
              HasSubstr("must be an array of strings"));
  EXPECT_THAT(ParseError(R"({"listen": ["unix:/run/w.sock", 7000]})"), HasSubstr("listen[1] in "));
  EXPECT_THAT(ParseError(R"({"tls": "/etc/cert.pem"})"), HasSubstr("tls in "));
  EXPECT_THAT(ParseError(R"({"tls": "/etc/cert.pem"})"), HasSubstr("must be an object"));
  EXPECT_THAT(ParseError(R"({"pools": [{"language": "bash", "warm": [1]}]})"),
              HasSubstr("pools[0].warm[0] in "));
  EXPECT_THAT(ParseError(R"({"pools": ["python"]})"), HasSubstr("pools[0] in "));
  EXPECT_THAT(ParseError(R"({"pools": {"language": "python"}})"),
              HasSubstr("must be an array of objects"));
  EXPECT_THAT(ParseError(R"({"log": {"level": null}})"), HasSubstr("log.level in "));
  EXPECT_THAT(ParseError(R"({"log": {"level": null}})"), HasSubstr("must be a string, not null"));
}

TEST(FromFileTest, IntegersOutOfTheirTypesRangeAreRefused) {
  EXPECT_THAT(ParseError(R"({"sessions": {"max_total": 3000000000}})"),
              HasSubstr("sessions.max_total in "));
  EXPECT_THAT(ParseError(R"({"sessions": {"max_total": 3000000000}})"),
              HasSubstr("is 3000000000; it must be between -2147483648 and 2147483647"));
  EXPECT_THAT(ParseError(R"({"executor": {"host_id_base": -1}})"),
              HasSubstr("it must be between 0 and 4294967295"));
  EXPECT_THAT(ParseError(R"({"limits": {"pids": 18446744073709551615}})"),
              HasSubstr("limits.pids in "));
}

TEST(FromFileTest, SyntaxErrorsGiveLineAndColumn) {
  TempDir dir;
  const std::string file =
      dir.Write("wardend.json", "{\n  \"listen\": [\"unix:/a\"]\n  \"log\": {}\n}");
  absl::StatusOr<DaemonOptions> options = DaemonOptions::FromFile(file);
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(std::string(options.status().message()),
              AllOf(HasSubstr(file + ": JSON syntax error at line 3, column 7"),
                    HasSubstr("is a comma missing before it?"), Not(HasSubstr("json.exception"))));
  EXPECT_THAT(ParseError(""), HasSubstr("JSON syntax error at line 1, column 1"));
}

TEST(FromFileTest, CommentsAndTrailingCommasGetAHint) {
  EXPECT_THAT(ParseError("{\n  \"shutdown_grace_ms\": 5 // five\n}"),
              AllOf(HasSubstr("line 2"), HasSubstr("JSON has no comments")));
  EXPECT_THAT(ParseError("{\n  \"shutdown_grace_ms\": 5,\n}"),
              AllOf(HasSubstr("line 3, column 1"), HasSubstr("remove the trailing comma")));
}

TEST(FromFileTest, TopLevelMustBeAnObject) {
  EXPECT_THAT(ParseError(R"(["unix:/run/w.sock"])"),
              HasSubstr("the configuration must be a JSON object {...}, not an array"));
}

TEST(FromFileTest, EveryProblemIsReportedAtOnce) {
  const std::string message =
      ParseError(R"({"limts": {}, "log": {"level": 3}, "queue": {"max_depht": 1}})");
  EXPECT_THAT(message, AllOf(HasSubstr("3 problems in "), HasSubstr("unknown key 'limts'"),
                             HasSubstr("log.level in "), HasSubstr("unknown key 'max_depht'")));
}

TEST(FromFileTest, MissingFileSaysWhatToDo) {
  absl::StatusOr<DaemonOptions> options = DaemonOptions::FromFile("/nonexistent/wardend.json");
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(options.status().message()),
              AllOf(HasSubstr("/nonexistent/wardend.json"), HasSubstr("--config FILE")));
}

// ---------------------------------------------------------------------------
// Validate: each rule, as a change to the defaults and the message it gives.

struct Rule {
  const char* name;
  std::function<void(DaemonOptions&)> change;
  const char* message;  // a substring of Validate()'s message; "" = valid
};

const Rule kRules[] = {
    // Valid variations.
    {"UnixSocketOnly", [](DaemonOptions&) {}, ""},
    {"LoopbackWithInsecureFlag",
     [](DaemonOptions& o) {
       o.listen = {"127.0.0.1:7000", "[::1]:7001", "localhost:7002", "127.9.9.9:1",
                   "[::ffff:127.0.0.1]:65535"};
       o.allow_insecure_loopback = true;
     },
     ""},
    {"AdminListenHostPort", [](DaemonOptions& o) { o.admin_listen = "0.0.0.0:9090"; }, ""},
    {"PoolOfSizeZero",
     [](DaemonOptions& o) {
       o.pools = {{"bash", 0, {}}};
     },
     ""},
    {"NoPools", [](DaemonOptions& o) { o.pools.clear(); }, ""},
    {"ZeroShutdownGrace", [](DaemonOptions& o) { o.shutdown_grace_ms = 0; }, ""},

    // Listeners.
    {"EmptyListen", [](DaemonOptions& o) { o.listen.clear(); }, "listen is empty"},
    {"RelativeUnixPath", [](DaemonOptions& o) { o.listen = {"unix:wardend.sock"}; },
     "listen[0] is 'unix:wardend.sock': a UNIX socket needs an absolute path"},
    {"UnixPathTooLong", [](DaemonOptions& o) { o.listen = {"unix:/" + std::string(120, 'a')}; },
     "UNIX socket paths must be shorter than 108"},
    {"NoPort", [](DaemonOptions& o) { o.listen = {"127.0.0.1"}; }, "listen[0] is '127.0.0.1'"},
    {"PortZeroPicksAFreePort",
     [](DaemonOptions& o) {
       o.listen = {"127.0.0.1:0"};
       o.admin_listen = "127.0.0.1:0";
       o.allow_insecure_loopback = true;
     },
     ""},
    {"PortTooLarge", [](DaemonOptions& o) { o.listen = {"127.0.0.1:65536"}; },
     "the port must be 1 to 65535 (or 0 for any free port)"},
    {"NegativePort", [](DaemonOptions& o) { o.listen = {"127.0.0.1:-1"}; },
     "the port must be 1 to 65535"},
    {"PortNotANumber", [](DaemonOptions& o) { o.listen = {"127.0.0.1:http"}; },
     "the port must be 1 to 65535"},
    {"EmptyHost", [](DaemonOptions& o) { o.listen = {":7000"}; },
     "name the host, e.g. 127.0.0.1:7000"},
    {"BareIpv6", [](DaemonOptions& o) { o.listen = {"::1:7000"}; },
     "put an IPv6 address in brackets, e.g. [::1]:7000"},
    {"BracketsWithoutPort", [](DaemonOptions& o) { o.listen = {"[::1]"}; },
     "write an IPv6 address with its port as [ADDRESS]:PORT"},
    {"BadIpv6", [](DaemonOptions& o) { o.listen = {"[::zz]:7000"}; },
     "'::zz' is not an IPv6 address"},
    {"BadHostName", [](DaemonOptions& o) { o.listen = {"exa mple:7000"}; },
     "is neither an IP address nor a host name"},
    {"DuplicateListener",
     [](DaemonOptions& o) {
       o.listen = {"unix:/run/a.sock", "unix:/run/a.sock"};
     },
     "listen has 'unix:/run/a.sock' twice"},
    {"LoopbackWithoutTls", [](DaemonOptions& o) { o.listen = {"127.0.0.1:7000"}; },
     "TCP listener 127.0.0.1:7000 has no TLS: set tls.cert_file/key_file, or set "
     "allow_insecure_loopback for loopback-only testing"},
    {"Ipv6LoopbackWithoutTls", [](DaemonOptions& o) { o.listen = {"[::1]:7000"}; },
     "TCP listener [::1]:7000 has no TLS"},
    {"NetworkWithoutTlsEvenIfInsecureLoopback",
     [](DaemonOptions& o) {
       o.listen = {"0.0.0.0:7000"};
       o.allow_insecure_loopback = true;
       o.auth.tokens_file = "/etc/warden/tokens.json";
     },
     "TCP listener 0.0.0.0:7000 is not loopback and has no TLS: set tls.cert_file and "
     "tls.key_file"},
    {"HostNameIsNotLoopback",
     [](DaemonOptions& o) {
       o.listen = {"warden.internal:7000"};
       o.allow_insecure_loopback = true;
     },
     "TCP listener warden.internal:7000 is not loopback and has no TLS"},
    {"NetworkWithoutAuthentication",
     [](DaemonOptions& o) {
       o.listen = {"unix:/run/a.sock", "[::]:7000"};
     },
     "TCP listener [::]:7000 is reachable from the network but nothing authenticates callers: "
     "set auth.tokens_file (bearer tokens), or tls.client_ca_file (mTLS)"},
    {"AdminListenUnix", [](DaemonOptions& o) { o.admin_listen = "unix:/run/admin.sock"; },
     "admin_listen is 'unix:/run/admin.sock': it must be HOST:PORT"},
    {"AdminListenNoPort", [](DaemonOptions& o) { o.admin_listen = "localhost"; },
     "admin_listen is 'localhost'"},
    {"AdminListenHostName", [](DaemonOptions& o) { o.admin_listen = "metrics.internal:9464"; },
     "admin_listen is 'metrics.internal:9464': use an IP address or localhost"},
    {"AdminListenLocalhostAndIpv6", [](DaemonOptions& o) { o.admin_listen = "localhost:9464"; },
     ""},
    {"HttpListenLoopbackWithInsecureFlag",
     [](DaemonOptions& o) {
       o.http_listen = "127.0.0.1:8080";
       o.allow_insecure_loopback = true;
     },
     ""},
    {"HttpListenNetworkWithTokens",
     [](DaemonOptions& o) {
       o.http_listen = "0.0.0.0:8080";
       o.auth.tokens_file = "/etc/warden/tokens.json";
     },
     ""},
    {"HttpListenLoopbackWithoutTokensOrFlag", [](DaemonOptions& o) { o.http_listen = "127.0.0.1:8080"; },
     "http_listen 127.0.0.1:8080 would run code for anyone on this host without a token: set "
     "auth.tokens_file, or set allow_insecure_loopback"},
    {"HttpListenNetworkWithoutTokens",
     [](DaemonOptions& o) {
       o.http_listen = "[::]:8080";
       o.allow_insecure_loopback = true;
     },
     "http_listen [::]:8080 is reachable from the network but nothing authenticates callers: set "
     "auth.tokens_file"},
    {"HttpListenUnix", [](DaemonOptions& o) { o.http_listen = "unix:/run/http.sock"; },
     "http_listen is 'unix:/run/http.sock': it must be HOST:PORT"},
    {"HttpAllowedHostWildcard", [](DaemonOptions& o) { o.http.allowed_hosts = {"*.example.com"}; },
     "http.allowed_hosts: '*.example.com' is not a host name: give a name or name:port"},
    {"HttpAllowedOriginWithPath", [](DaemonOptions& o) { o.http.allowed_origins = {"https://app.example.com/ui"}; },
     "http.allowed_origins: 'https://app.example.com/ui' is not an origin (a path, user or wildcard): give "
     "scheme://host[:port]"},
    {"HttpAllowedOriginNull", [](DaemonOptions& o) { o.http.allowed_origins = {"null"}; },
     "http.allowed_origins: 'null' is not an origin (no scheme)"},
    {"HttpAllowedHostsAndOrigins",
     [](DaemonOptions& o) {
       o.http.allowed_hosts = {"warden.internal", "box.lan:8080", "[::1]"};
       o.http.allowed_origins = {"https://app.example.com", "http://localhost:5173"};
     },
     ""},
    {"HttpHeadTimeoutTooShort", [](DaemonOptions& o) { o.http.head_timeout_ms = 0; },
     "http.head_timeout_ms is 0; it must be between 100 and 3600000"},
    {"HttpNoConnections", [](DaemonOptions& o) { o.http.max_connections = 0; },
     "http.max_connections is 0; it must be between 1 and 1000000"},
    {"HttpNoHandlerThreads", [](DaemonOptions& o) { o.http.handler_threads = 0; },
     "http.handler_threads is 0; it must be between 1 and 16384"},
    {"HttpListenSameAsAdmin",
     [](DaemonOptions& o) {
       o.http_listen = "127.0.0.1:8080";
       o.admin_listen = "127.0.0.1:8080";
       o.allow_insecure_loopback = true;
     },
     "http_listen and admin_listen are both 127.0.0.1:8080"},

    // TLS.
    {"CertWithoutKey", [](DaemonOptions& o) { o.tls.cert_file = "/etc/ssl/certs"; },
     "tls.cert_file is set but tls.key_file is not: set both"},
    {"KeyWithoutCert", [](DaemonOptions& o) { o.tls.key_file = "/etc/hostname"; },
     "tls.key_file is set but tls.cert_file is not: set both"},
    {"ClientCaWithoutServerCert", [](DaemonOptions& o) { o.tls.client_ca_file = "/etc/hostname"; },
     "tls.client_ca_file is set without tls.cert_file/key_file"},
    {"MissingCertFile",
     [](DaemonOptions& o) {
       o.tls.cert_file = "/nonexistent/cert.pem";
       o.tls.key_file = "/nonexistent/key.pem";
     },
     "tls.cert_file is '/nonexistent/cert.pem': No such file or directory; point it at an "
     "existing PEM file"},
    {"CertIsADirectory",
     [](DaemonOptions& o) {
       o.tls.cert_file = "/";
       o.tls.key_file = "/";
     },
     "tls.key_file is '/': not a regular file"},

    // Limits.
    {"ZeroDefaultWall", [](DaemonOptions& o) { o.limits.defaults.wall_ms = 0; },
     "limits.defaults.wall_ms is 0; it must be positive"},
    {"NegativeMaxCpu", [](DaemonOptions& o) { o.limits.max.cpu_ms = -1; },
     "limits.max.cpu_ms is -1; it must be positive"},
    {"DefaultAboveMax", [](DaemonOptions& o) { o.limits.defaults.memory_mb = 8192; },
     "limits.defaults.memory_mb (8192) is above limits.max.memory_mb (4096): lower the default "
     "or raise the maximum"},
    {"DefaultOutputAboveMax",
     [](DaemonOptions& o) { o.limits.defaults.output_bytes = o.limits.max.output_bytes + 1; },
     "limits.defaults.output_bytes (16777217) is above limits.max.output_bytes"},
    {"TinyDefaultMemory", [](DaemonOptions& o) { o.limits.defaults.memory_mb = 4; },
     "a sandbox needs at least 8"},
    {"ZeroMaxCode", [](DaemonOptions& o) { o.limits.max_code_bytes = 0; },
     "limits.max_code_bytes is 0"},
    {"ZeroMaxFile", [](DaemonOptions& o) { o.limits.max_file_bytes = 0; },
     "limits.max_file_bytes is 0"},
    {"ZeroPids", [](DaemonOptions& o) { o.limits.pids = 0; }, "limits.pids is 0"},
    {"ZeroTmpfs", [](DaemonOptions& o) { o.limits.tmpfs_mb = 0; }, "limits.tmpfs_mb is 0"},

    // Sessions.
    {"ZeroSessions", [](DaemonOptions& o) { o.sessions.max_total = 0; },
     "sessions.max_total is 0; it must be positive"},
    {"ZeroSessionsPerTenant", [](DaemonOptions& o) { o.sessions.max_per_tenant = 0; },
     "sessions.max_per_tenant is 0"},
    {"ZeroDefaultTtl", [](DaemonOptions& o) { o.sessions.default_ttl_seconds = 0; },
     "sessions.default_ttl_seconds is 0"},
    {"ZeroIdleTimeout", [](DaemonOptions& o) { o.sessions.default_idle_timeout_seconds = 0; },
     "sessions.default_idle_timeout_seconds is 0"},
    {"DefaultTtlAboveMax", [](DaemonOptions& o) { o.sessions.max_ttl_seconds = 60; },
     "sessions.default_ttl_seconds (3600) is above sessions.max_ttl_seconds (60)"},

    // Pools.
    {"UnknownLanguage",
     [](DaemonOptions& o) {
       o.pools = {{"ruby", 1, {}}};
     },
     "pools[0].language is 'ruby'; it must be python, javascript, bash, typescript, r or java"},
    {"PoolTooLarge",
     [](DaemonOptions& o) {
       o.pools = {{"python", 65, {}}};
     },
     "pools[0].size is 65; it must be 0 to 64"},
    {"NegativePool",
     [](DaemonOptions& o) {
       o.pools = {{"python", -1, {}}};
     },
     "pools[0].size is -1"},
    {"TwoPoolsOneLanguage",
     [](DaemonOptions& o) {
       o.pools = {{"bash", 1, {}}, {"bash", 2, {}}};
     },
     "pools[1] is a second pool for bash"},
    {"PoolMemoryAboveTheMaximum",
     [](DaemonOptions& o) { o.pools = {{"python", 1, {}, 100'000}}; },
     "pools[0].memory_mb is 100000; it must be 1 to limits.max.memory_mb (4096)"},
    {"SecondPoolOfTheSameProfile",
     [](DaemonOptions& o) { o.pools = {{"python", 1, {}, 0}, {"python", 1, {}, 512}}; },
     "pools[1] is a second pool for python with 512 MiB"},
    {"WarmForBash",
     [](DaemonOptions& o) {
       o.pools = {{"bash", 1, {"numpy"}}};
     },
     "pools[0].warm lists modules for a bash pool"},
    {"WarmIsNotAModule",
     [](DaemonOptions& o) {
       o.pools = {{"python", 1, {"os; import shutil"}}};
     },
     "pools[0].warm has 'os; import shutil', which is not a Python module name"},

    // Admission, shutdown, logs.
    {"ZeroQueue", [](DaemonOptions& o) { o.queue.max_depth = 0; }, "queue.max_depth is 0"},
    {"ZeroQueueWait", [](DaemonOptions& o) { o.queue.max_wait_ms = 0; }, "queue.max_wait_ms is 0"},
    {"ZeroTenantLine", [](DaemonOptions& o) { o.queue.max_waiting_per_tenant = 0; },
     "queue.max_waiting_per_tenant is 0"},
    {"NegativeMaxRunning", [](DaemonOptions& o) { o.queue.max_running = -1; },
     "queue.max_running is -1; it must be 0"},
    {"PoolMaxBelowSize", [](DaemonOptions& o) { o.pools = {{"python", 4, {}, 0, 2}}; },
     "pools[0].max_size is 2; it must be 0 (a fixed pool of `size`) or 4 (the size) to 256"},
    {"ZeroPerTenant", [](DaemonOptions& o) { o.max_concurrent_per_tenant = 0; },
     "max_concurrent_per_tenant is 0"},
    {"NegativeGrace", [](DaemonOptions& o) { o.shutdown_grace_ms = -1; },
     "shutdown_grace_ms is -1; it must be 0 to 3600000"},
    {"LogFormat", [](DaemonOptions& o) { o.log.format = "xml"; },
     "log.format is 'xml'; it must be text or json"},
    {"LogLevel", [](DaemonOptions& o) { o.log.level = "verbose"; },
     "log.level is 'verbose'; it must be trace, debug, info, warn or error"},

    // Executor and kernels.
    {"NoHostIds", [](DaemonOptions& o) { o.executor.host_id_count = 0; },
     "executor.host_id_count is 0"},
    {"HostIdsOfRealUsers", [](DaemonOptions& o) { o.executor.host_id_base = 1000; },
     "executor.host_id_base is 1000; ids below 65536 belong to real users"},
    {"HostIdsPastTheEnd",
     [](DaemonOptions& o) {
       o.executor.host_id_base = 0xFFFF0000u;
       o.executor.host_id_count = 0x10000;
     },
     "the range must end below 4294967295"},
    {"BuildIdsOverlapTheSandboxes",
     [](DaemonOptions& o) { o.templates.build_host_id_base = o.executor.host_id_base + 100; },
     "overlap the sandboxes'"},
    {"BuildIdsOfRealUsers", [](DaemonOptions& o) { o.templates.build_host_id_base = 1000; },
     "templates.build_host_id_base is 1000; use an unused range above 65535"},
    {"RelativeWheelhouse", [](DaemonOptions& o) { o.pools[0].wheelhouse = "wheels"; },
     "pools[0].wheelhouse is 'wheels': use an absolute path"},
    {"MissingWheelhouse", [](DaemonOptions& o) { o.pools[0].wheelhouse = "/nonexistent/wheels"; },
     "pools[0].wheelhouse is '/nonexistent/wheels', which is not a directory"},
    {"WheelhouseForJavascript", [](DaemonOptions& o) { o.pools = {{"javascript", 1, {}, 0, 0, "/tmp"}}; },
     "pools[0].wheelhouse is set for a javascript pool"},
    {"RelativeKernelsDir", [](DaemonOptions& o) { o.kernels_dir = "kernels"; },
     "kernels_dir is 'kernels': use an absolute path"},
    {"MissingKernelsDir", [](DaemonOptions& o) { o.kernels_dir = "/nonexistent/kernels"; },
     "kernels_dir is '/nonexistent/kernels', which is not a directory"},
    {"RelativeZygoteProgram", [](DaemonOptions& o) { o.zygote.program = "warden-python-zygote"; },
     "zygote.program is 'warden-python-zygote', which is not an executable absolute path"},
    {"MissingZygoteProgram", [](DaemonOptions& o) { o.zygote.program = "/nonexistent/zygote"; },
     "zygote.program is '/nonexistent/zygote', which is not an executable absolute path"},
    {"RelativeStateDir", [](DaemonOptions& o) { o.state_dir = "run/warden"; },
     "state_dir is 'run/warden': use an absolute path"},
    {"SocketGroupThatExists", [](DaemonOptions& o) { o.socket_group = "root"; }, ""},
    {"UnknownSocketGroup", [](DaemonOptions& o) { o.socket_group = "no-such-group-here"; },
     "socket_group is 'no-such-group-here', which is not a group on this host: create it"},
    {"SocketGroupWithoutUnixSocket",
     [](DaemonOptions& o) {
       o.listen = {"127.0.0.1:7000"};
       o.allow_insecure_loopback = true;
       o.socket_group = "root";
     },
     "socket_group is 'root' but no listen address is a unix: socket"},
};

class ValidateRuleTest : public ::testing::TestWithParam<Rule> {};

TEST_P(ValidateRuleTest, GivesItsMessage) {
  DaemonOptions options;
  GetParam().change(options);
  absl::Status status = options.Validate();
  if (std::string(GetParam().message).empty()) {
    EXPECT_TRUE(status.ok()) << status;
  } else {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(GetParam().message));
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, ValidateRuleTest, ::testing::ValuesIn(kRules),
                         [](const ::testing::TestParamInfo<Rule>& info) {
                           return std::string(info.param.name);
                         });

TEST(ValidateTest, TlsFilesThatExistSatisfyEveryTcpListener) {
  TempDir dir;
  DaemonOptions options;
  options.listen = {"0.0.0.0:7000", "127.0.0.1:7001"};
  options.tls.cert_file = dir.Write("cert.pem", "cert");
  options.tls.key_file = dir.Write("key.pem", "key");
  options.tls.client_ca_file = dir.Write("ca.pem", "ca");  // mTLS authenticates callers
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();

  options.tls.client_ca_file.clear();
  options.auth.tokens_file = "/etc/warden/tokens.json";  // or bearer tokens do
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
}

TEST(DaemonOptionsTest, StateDirDefaultsToTheDirectoryOfTheFirstUnixSocket) {
  DaemonOptions options;
  EXPECT_EQ(options.StateDirectory(), "/run/warden");
  options.listen = {"127.0.0.1:7000", "unix:/tmp/t/w.sock", "unix:/var/x.sock"};
  EXPECT_EQ(options.StateDirectory(), "/tmp/t");
  options.listen = {"127.0.0.1:7000"};
  EXPECT_EQ(options.StateDirectory(), "");  // TCP only: no lock, no reclaim
  options.state_dir = "/srv/warden-state";
  EXPECT_EQ(options.StateDirectory(), "/srv/warden-state");
}

TEST(ValidateTest, KernelsDirThatExistsIsAccepted) {
  TempDir dir;
  DaemonOptions options;
  options.kernels_dir = dir.path();
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
}

TEST(ValidateTest, WheelhouseMustBeReadableBySandboxes) {
  TempDir dir;
  const std::string wheels = dir.path() + "/wheels";
  ASSERT_EQ(::mkdir(wheels.c_str(), 0700), 0);
  DaemonOptions options;
  options.pools[0].wheelhouse = wheels;
  auto problem = [&options] { return std::string(options.Validate().message()); };
  if (::geteuid() == 0) {  // as root, sandboxes are other users
    EXPECT_THAT(problem(), HasSubstr("which sandboxes cannot read: chmod o+rx it"));
    ASSERT_EQ(::chmod(wheels.c_str(), 0755), 0);
    const std::string wheel = wheels + "/tiny-1.0-py3-none-any.whl";
    std::ofstream(wheel) << "zip";
    ASSERT_EQ(::chmod(wheel.c_str(), 0600), 0);
    EXPECT_THAT(problem(), HasSubstr("has tiny-1.0-py3-none-any.whl, which sandboxes cannot read"));
    ASSERT_EQ(::chmod(wheel.c_str(), 0644), 0);
  }
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
  // A symlink would dangle inside the sandbox.
  ASSERT_EQ(::symlink("/etc/hostname", (wheels + "/link-1.0-py3-none-any.whl").c_str()), 0);
  EXPECT_THAT(problem(), HasSubstr("wheels must be regular files (not symlinks)"));
}

TEST(ValidateTest, EveryProblemIsReportedAtOnce) {
  DaemonOptions options;
  options.listen = {"127.0.0.1:7000"};
  options.log.format = "xml";
  options.pools = {{"ruby", 1, {}}};
  const absl::Status status = options.Validate();
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("3 problems in the configuration:"),
                    HasSubstr("TCP listener 127.0.0.1:7000 has no TLS"),
                    HasSubstr("log.format is 'xml'"), HasSubstr("pools[0].language is 'ruby'")));
}

}  // namespace
}  // namespace warden

namespace warden {
namespace {

TEST(FromFileTest, AgentSectionConfiguresTheModelServer) {
  absl::StatusOr<DaemonOptions> options = Parse(R"({"agent": {"llm": {"base_url": "http://127.0.0.1:8000/v1",
      "model": "qwen", "api_key_env": "OPENAI_API_KEY", "temperature": 0.5, "tools": "text"},
      "default_max_iterations": 5}})");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->agent.llm.base_url, "http://127.0.0.1:8000/v1");
  EXPECT_EQ(options->agent.llm.model, "qwen");
  EXPECT_EQ(options->agent.llm.api_key_env, "OPENAI_API_KEY");
  EXPECT_EQ(options->agent.llm.temperature, 0.5);
  EXPECT_EQ(options->agent.llm.tools, "text");
  EXPECT_EQ(options->agent.default_max_iterations, 5);
  EXPECT_EQ(options->agent.max_iterations, 100);  // untouched default
  EXPECT_TRUE(options->Validate().ok()) << options->Validate();
}

TEST(DaemonOptionsTest, AgentSettingsAreChecked) {
  DaemonOptions o;
  o.agent.llm.base_url = "127.0.0.1:8000";
  o.agent.llm.tools = "sometimes";
  o.agent.llm.tool_choice = "execute";
  o.agent.default_max_iterations = 500;
  const std::string message(o.Validate().message());
  EXPECT_THAT(message, ::testing::HasSubstr("http:// or https://"));
  EXPECT_THAT(message, ::testing::HasSubstr("agent.llm.model is empty"));
  EXPECT_THAT(message, ::testing::HasSubstr("auto, native or text"));
  EXPECT_THAT(message, ::testing::HasSubstr("agent.llm.tool_choice is 'execute'; it must be auto, required"));
  EXPECT_THAT(message, ::testing::HasSubstr("agent.default_max_iterations (500) is above"));
}

TEST(FromFileTest, EgressSectionReadsCeilingsSecretsHostsAndPoolPolicies) {
  absl::StatusOr<DaemonOptions> options = Parse(R"({
    "pools": [{"language": "python", "network": {"allow": ["pypi.org"], "deny": ["10.0.0.0/8"]}}],
    "egress": {"enabled": true, "hosts": {"pypi.test": ["10.77.0.2", "fd77::2"]},
               "allow_internal": ["10.77.0.0/24:443"],
               "default_ceiling": {"allow": ["*"], "max_bytes_per_session": 1000},
               "tenants": {"t": {"allow": ["*.corp.test"], "session_secrets": false}},
               "secrets": [{"name": "K", "value_file": "/etc/warden/k", "hosts": ["api.test"], "tenants": ["t"]}]}})");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->egress.enabled);
  EXPECT_EQ(options->egress.hosts.at("pypi.test"), (std::vector<std::string>{"10.77.0.2", "fd77::2"}));
  EXPECT_EQ(options->egress.default_ceiling.max_bytes_per_session, 1000);
  EXPECT_FALSE(options->egress.tenants.at("t").session_secrets);
  EXPECT_EQ(options->egress.tenants.at("t").policy.allow, std::vector<std::string>{"*.corp.test"});
  EXPECT_EQ(options->egress.secrets.at(0).tenants, std::vector<std::string>{"t"});
  EXPECT_EQ(options->pools.at(0).network.deny, std::vector<std::string>{"10.0.0.0/8"});
  EXPECT_TRUE(options->Validate().ok()) << options->Validate();
  EXPECT_THAT(ParseError(R"({"egress": {"tenants": {"t": {"alow": []}}}})"),
              ::testing::HasSubstr("unknown key 'alow' in egress.tenants.t"));
}

TEST(DaemonOptionsTest, EgressSettingsAreChecked) {
  DaemonOptions o;
  o.egress.hosts["not a name"] = {"10.0.0.1"};
  o.egress.hosts["ok.test"] = {"not-an-address"};
  o.egress.allow_internal = {"example.com"};
  o.egress.default_ceiling.policy.allow = {"*example.com"};
  o.egress.tenants["t"].max_connections_per_session = 0;
  o.egress.secrets.push_back({"1BAD", "relative/file", {}, {}});
  o.pools[0].network.allow = {"[::1"};
  o.egress.ca_cert_file = "/ca.pem";
  const std::string message(o.Validate().message());
  EXPECT_THAT(message, ::testing::HasSubstr("egress.hosts has 'not a name'"));
  EXPECT_THAT(message, ::testing::HasSubstr("egress.hosts.ok.test has 'not-an-address'"));
  EXPECT_THAT(message, ::testing::HasSubstr("egress.allow_internal[0] is 'example.com': give a network"));
  EXPECT_THAT(message, ::testing::HasSubstr("egress.default_ceiling.allow[0]"));
  EXPECT_THAT(message, ::testing::HasSubstr("egress.tenants.t.max_connections_per_session is 0"));
  EXPECT_THAT(message, ::testing::HasSubstr("egress.secrets[0]"));
  EXPECT_THAT(message, ::testing::HasSubstr("egress.secrets[0].value_file is 'relative/file'"));
  EXPECT_THAT(message, ::testing::HasSubstr("pools[0].network.allow[0]"));
  EXPECT_THAT(message, ::testing::HasSubstr("set egress.ca_cert_file and egress.ca_key_file together"));
}

}  // namespace
}  // namespace warden

namespace warden {
namespace {

TEST(FleetOptionsTest, NodeNamesBecomeLabelsThatFitInASessionId) {
  EXPECT_EQ(*FleetOptions::NodeIdFrom("kj44r8rfuaz5gcsjw5decv3lv"), "kj44r8rfuaz5gcsjw5decv3lv");  // Swarm's
  EXPECT_EQ(*FleetOptions::NodeIdFrom("IP-10-0-1-23.ec2.internal"), "ip-10-0-1-23-ec2-internal");
  const std::string long_name = "gke-cluster-one-default-pool-8a7b6c5d-x1y2.europe-west4-a.internal";
  const std::string id = *FleetOptions::NodeIdFrom(long_name);
  EXPECT_LE(id.size(), FleetOptions::kMaxNodeIdBytes);
  EXPECT_EQ(id, *FleetOptions::NodeIdFrom(long_name)) << "stable";
  EXPECT_NE(id, *FleetOptions::NodeIdFrom(long_name + "2")) << "a digest of the whole name";
  EXPECT_LE(std::string("s-") .size() + 24 + 1 + id.size(), 63u) << "warden-keeper's records hold 63 bytes";
  for (const char* bad : {"", "-a", "a b", "node/1", "a-"}) EXPECT_FALSE(FleetOptions::NodeIdFrom(bad).ok()) << bad;
}

TEST(FleetOptionsTest, AFleetNodeNeedsSharedStorageAndTheGatewaysCaWithTls) {
  DaemonOptions options;
  options.fleet.node_id = "n1";
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("fleet.shared_dir"));
  options.fleet.shared_dir = "/var/lib/warden/shared";
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
  EXPECT_EQ(options.SnapshotDirectory(), "/var/lib/warden/shared/snapshots");
  options.fleet.gateway_name = "warden-gateway";
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("together"));
  options.fleet.node_id = "Node.A";
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("write it as 'node-a'"));
}

}  // namespace
}  // namespace warden
