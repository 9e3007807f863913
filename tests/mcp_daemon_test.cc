// MCP on wardend's HTTP front with bearer tokens, over real HTTP, gRPC and
// sandboxes: the token maps to the same tenants as on gRPC, and bad input
// (no token, a wrong one, malformed JSON, an oversized body, an unknown
// tool or session) gets MCP's error shape and leaves the daemon serving.
// The unmodified SDK and conformance clients: tests/protocols/mcp.test.mjs.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/daemon.h"

namespace warden {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using ::testing::HasSubstr;
using nlohmann::json;

constexpr char kAliceToken[] = "alice-mcp-5Gq8Vn2LxR7sTk0W";
constexpr char kBobToken[] = "bob-mcp-Jd9Fw3QcN1yUg6XbE4";

struct Reply {
  unsigned status = 0;
  json body;
  std::string raw;
};

class McpDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir[] = "/tmp/warden-mcp-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = new std::string(dir);
    const std::string tokens = *dir_ + "/tokens.json";
    std::ofstream(tokens) << absl::StrCat(R"({"tokens": [{"token": ")", kAliceToken,
                                          R"(", "tenant": "alice"}, {"token": ")", kBobToken,
                                          R"(", "tenant": "bob"}]})");
    ASSERT_EQ(chmod(tokens.c_str(), 0600), 0);

    DaemonOptions options;
    options.listen = {"unix:" + *dir_ + "/w.sock"};
    options.http_listen = "127.0.0.1:0";
    options.auth.tokens_file = tokens;
    options.pools = {{"python", 1, {}}, {"javascript", 0, {}}, {"bash", 0, {}}};
    // A range of its own: ctest runs the daemon tests side by side.
    options.executor.host_id_base = static_cast<uid_t>(3'000'000 + (getpid() % 4096) * 256);
    options.executor.host_id_count = 256;
    options.limits.max_code_bytes = 64 * 1024;
    options.limits.max_file_bytes = 1 << 20;
    options.shutdown_grace_ms = 2'000;
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
    ASSERT_TRUE(daemon_->Start().ok());
    ASSERT_GT(daemon_->http_port(), 0);
  }
  static void TearDownTestSuite() {
    if (daemon_ != nullptr) daemon_->Shutdown(absl::Seconds(5));
    delete daemon_;
    daemon_ = nullptr;
    std::error_code ignored;
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_, ignored);
    delete dir_;
  }

  static Reply Post(const std::string& body, const std::string& token, const std::string& path = "/mcp",
                    const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    net::io_context io;
    beast::tcp_stream stream(io);
    stream.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"),
                                          static_cast<unsigned short>(daemon_->http_port())));
    bhttp::request<bhttp::string_body> req{bhttp::verb::post, path, 11};
    req.set(bhttp::field::host, "127.0.0.1");
    req.set(bhttp::field::content_type, "application/json");
    req.set(bhttp::field::accept, "application/json, text/event-stream");
    if (!token.empty()) req.set(bhttp::field::authorization, absl::StrCat("Bearer ", token));
    for (const auto& [name, value] : headers) req.set(name, value);
    req.body() = body;
    req.prepare_payload();
    beast::error_code ec;
    bhttp::write(stream, req, ec);
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(stream, buffer, res, ec);
    EXPECT_FALSE(ec) << ec.message();
    Reply reply{res.result_int(), json::parse(res.body(), nullptr, false), res.body()};
    return reply;
  }

  static json Call(const std::string& tool, json arguments, const std::string& token) {
    Reply r = Post(json({{"jsonrpc", "2.0"},
                         {"id", 1},
                         {"method", "tools/call"},
                         {"params", {{"name", tool}, {"arguments", arguments}}}})
                       .dump(),
                   token);
    EXPECT_EQ(r.status, 200u) << r.raw;
    return r.body;
  }

  static void ExpectStillServing() {
    Reply r = Post(R"({"jsonrpc": "2.0", "id": 5, "method": "ping"})", kAliceToken);
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, json({{"jsonrpc", "2.0"}, {"id", 5}, {"result", json::object()}}));
  }

  static std::string* dir_;
  static Daemon* daemon_;
};

std::string* McpDaemonTest::dir_ = nullptr;
Daemon* McpDaemonTest::daemon_ = nullptr;

TEST_F(McpDaemonTest, AMissingOrUnknownTokenIs401WithAJsonRpcError) {
  for (const std::string token : {"", "not-a-token-0123456789"}) {
    Reply r = Post(R"({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})", token);
    EXPECT_EQ(r.status, 401u) << token;
    EXPECT_EQ(r.body["jsonrpc"], "2.0");
    EXPECT_THAT(r.body["error"]["message"].get<std::string>(), HasSubstr("Authorization: Bearer")) << r.raw;
    EXPECT_THAT(r.raw, ::testing::Not(HasSubstr(kAliceToken)));
  }
  ExpectStillServing();
}

TEST_F(McpDaemonTest, TheTokenIsTheTenantOnEveryCall) {
  json created = Call("create_session", json::object(), kAliceToken);
  const std::string id = created["result"]["structuredContent"]["session_id"];
  ASSERT_FALSE(id.empty()) << created;
  json ran = Call("execute_code", {{"code", "x = 20\nx * 2 + 2"}, {"session_id", id}}, kAliceToken);
  EXPECT_EQ(ran["result"]["structuredContent"]["results"][0]["data"]["text/plain"], "42") << ran;

  // Bob cannot see Alice's session: to him it does not exist.
  json stolen = Call("execute_code", {{"code", "x"}, {"session_id", id}}, kBobToken);
  EXPECT_EQ(stolen["result"]["isError"], true) << stolen;
  EXPECT_THAT(stolen["result"]["content"][0]["text"].get<std::string>(), HasSubstr("NOT_FOUND"));

  EXPECT_FALSE(Call("close_session", {{"session_id", id}}, kAliceToken)["result"].contains("isError"));
}

TEST_F(McpDaemonTest, BadInputGetsMcpErrorsAndTheDaemonKeepsServing) {
  Reply malformed = Post("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ", kAliceToken);
  EXPECT_EQ(malformed.status, 400u);
  EXPECT_EQ(malformed.body["error"]["code"], -32700);

  Reply oversized = Post(std::string(8 << 20, ' '), kAliceToken);
  EXPECT_EQ(oversized.status, 413u);
  EXPECT_THAT(oversized.body["error"]["message"].get<std::string>(), HasSubstr("exceeds"));

  json unknown_tool = Call("format_disk", json::object(), kAliceToken);
  EXPECT_EQ(unknown_tool["error"]["code"], -32602);
  EXPECT_THAT(unknown_tool["error"]["message"].get<std::string>(), HasSubstr("unknown tool 'format_disk'"));

  json unknown_session = Call("list_files", {{"session_id", "s-0123456789abcdef01234567"}}, kAliceToken);
  EXPECT_EQ(unknown_session["result"]["isError"], true);

  Reply unknown_path = Post("{}", kAliceToken, "/mcp/extra");
  EXPECT_EQ(unknown_path.status, 404u);
  ExpectStillServing();
}

// The stateless 2026-07-28 revision over real HTTP: no initialize, the
// version in every request's _meta and headers, state kept by session_id.
json Modern(const std::string& method, json params, const std::string& version = "2026-07-28") {
  params["_meta"] = {{"io.modelcontextprotocol/protocolVersion", version},
                     {"io.modelcontextprotocol/clientCapabilities", json::object()}};
  return {{"jsonrpc", "2.0"}, {"id", 9}, {"method", method}, {"params", params}};
}

std::vector<std::pair<std::string, std::string>> ModernHeaders(const std::string& method,
                                                               const std::string& name = "",
                                                               const std::string& version = "2026-07-28") {
  std::vector<std::pair<std::string, std::string>> headers = {{"MCP-Protocol-Version", version},
                                                              {"Mcp-Method", method}};
  if (!name.empty()) headers.emplace_back("Mcp-Name", name);
  return headers;
}

TEST_F(McpDaemonTest, TheStatelessRevisionRunsCodeInASessionWithoutAHandshake) {
  Reply discover = Post(Modern("server/discover", json::object()).dump(), kAliceToken, "/mcp",
                        ModernHeaders("server/discover"));
  ASSERT_EQ(discover.status, 200u) << discover.raw;
  EXPECT_EQ(discover.body["result"]["supportedVersions"][0], "2026-07-28");
  EXPECT_EQ(discover.body["result"]["resultType"], "complete");

  auto call = [](const std::string& tool, json arguments) {
    Reply r = Post(Modern("tools/call", {{"name", tool}, {"arguments", arguments}}).dump(), kAliceToken, "/mcp",
                   ModernHeaders("tools/call", tool));
    EXPECT_EQ(r.status, 200u) << r.raw;
    EXPECT_EQ(r.body["result"]["resultType"], "complete") << r.raw;
    return r.body["result"];
  };
  const std::string id = call("create_session", json::object())["structuredContent"]["session_id"];
  ASSERT_FALSE(id.empty());
  call("execute_code", {{"code", "x = 41"}, {"session_id", id}});
  json ran = call("execute_code", {{"code", "x + 1"}, {"session_id", id}});
  EXPECT_EQ(ran["structuredContent"]["results"][0]["data"]["text/plain"], "42") << ran;
  // A name outside plain ASCII's safe set may come base64-encoded.
  Reply encoded = Post(Modern("tools/call", {{"name", "close_session"}, {"arguments", {{"session_id", id}}}}).dump(),
                       kAliceToken, "/mcp", ModernHeaders("tools/call", "=?base64?Y2xvc2Vfc2Vzc2lvbg==?="));
  EXPECT_EQ(encoded.status, 200u) << encoded.raw;
  EXPECT_FALSE(encoded.body["result"].contains("isError")) << encoded.raw;
}

TEST_F(McpDaemonTest, TheStatelessRevisionsErrorsCarryTheirHttpStatus) {
  const std::string list = Modern("tools/list", json::object()).dump();
  // Headers that do not mirror the body: 400 with HeaderMismatch.
  for (const auto& headers : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"Mcp-Method", "tools/list"}},                                       // no version header
           {{"MCP-Protocol-Version", "2026-07-28"}},                              // no Mcp-Method
           ModernHeaders("tools/call"),                                           // another method
           ModernHeaders("tools/list", "", "2025-11-25"),                         // another version
       }) {
    Reply r = Post(list, kAliceToken, "/mcp", headers);
    EXPECT_EQ(r.status, 400u) << r.raw;
    EXPECT_EQ(r.body["error"]["code"], -32020) << r.raw;
    EXPECT_EQ(r.body["id"], 9);
  }
  Reply wrong_name = Post(Modern("tools/call", {{"name", "execute_code"}, {"arguments", {{"code", "1"}}}}).dump(),
                          kAliceToken, "/mcp", ModernHeaders("tools/call", "list_files"));
  EXPECT_EQ(wrong_name.status, 400u);
  EXPECT_THAT(wrong_name.body["error"]["message"].get<std::string>(), HasSubstr("Mcp-Name"));

  // A version this server does not speak: 400 with the versions it does.
  Reply old = Post(Modern("tools/list", json::object(), "1900-01-01").dump(), kAliceToken, "/mcp",
                   ModernHeaders("tools/list", "", "1900-01-01"));
  EXPECT_EQ(old.status, 400u);
  EXPECT_EQ(old.body["error"]["code"], -32022);
  EXPECT_EQ(old.body["error"]["data"]["supported"][0], "2026-07-28");

  // A method it does not have: 404 with a JSON-RPC body, unlike a legacy
  // server's bare 404.
  Reply unknown = Post(Modern("resources/list", json::object()).dump(), kAliceToken, "/mcp",
                       ModernHeaders("resources/list"));
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_EQ(unknown.body["error"]["code"], -32601);

  // The modern version header on a body without _meta says what is missing.
  Reply bare = Post(R"({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})", kAliceToken, "/mcp",
                    ModernHeaders("tools/list"));
  EXPECT_EQ(bare.status, 400u);
  EXPECT_THAT(bare.body["error"]["message"].get<std::string>(), HasSubstr("_meta"));
  ExpectStillServing();
}

TEST_F(McpDaemonTest, AdminEndpointsShareThePortWithoutAToken) {
  net::io_context io;
  beast::tcp_stream stream(io);
  stream.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"),
                                        static_cast<unsigned short>(daemon_->http_port())));
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, "/metrics", 11};
  bhttp::write(stream, req);
  beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res;
  bhttp::read(stream, buffer, res);
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_THAT(res.body(), HasSubstr("warden_"));
}

}  // namespace
}  // namespace warden
