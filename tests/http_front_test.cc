// wardend's HTTP front against the web, over real HTTP, gRPC and sandboxes,
// per protocol (MCP, E2B control plane, E2B sandbox plane and envd, Kernel
// Gateway REST and WebSocket):
//   - an open loopback daemon (no tokens) refuses a foreign Host and a
//     foreign Origin on every route the router knows, WebSocket and SSE
//     included, in the protocol's error shape naming the setting, and serves
//     the hosts and origins its configuration lists, with CORS;
//   - a daemon with tokens refuses a missing and a wrong token, every E2B
//     sandbox-plane and envd route refuses a missing and a wrong access
//     token (the walk covers routes added later), and one tenant cannot
//     see, use or end another's sandbox, kernel or session.
#include <curl/curl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "fronts/http/router.h"
#include "fronts/http/testing/raw_socket.h"
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
using ::testing::Not;
using nlohmann::json;

constexpr char kAlice[] = "alice-http-8Wq2Xe5Rt7Yu1Io3";
constexpr char kBob[] = "bob-http-Pa4Sd6Fg8Hj0Kl2Zx9";
constexpr char kAllowedOrigin[] = "https://app.example";
constexpr char kEvilOrigin[] = "http://evil.example";

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Reply {
  unsigned status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  json Json() const { return json::parse(body, nullptr, false); }
  std::string Header(const std::string& name) const {
    auto it = headers.find(absl::AsciiStrToLower(name));
    return it == headers.end() ? "" : it->second;
  }
};

// The message of an error in `protocol`'s own shape; a failure when the
// body does not have that shape.
std::string MessageIn(const std::string& protocol, const Reply& reply) {
  const json body = reply.Json();
  if (protocol != "admin" && !body.is_object()) {
    ADD_FAILURE() << protocol << " error is not a JSON object: " << reply.status << " " << reply.body;
    return "";
  }
  if (protocol == "mcp") {
    EXPECT_EQ(body["jsonrpc"], "2.0") << reply.body;
    return body["error"]["message"].is_string() ? body["error"]["message"].get<std::string>() : "";
  }
  if (protocol == "e2b") {
    EXPECT_EQ(body["code"], reply.status) << reply.body;
    return body["message"].is_string() ? body["message"].get<std::string>() : "";
  }
  if (protocol == "envd") {
    EXPECT_TRUE(body["code"].is_string()) << reply.body;  // Connect's code names
    return body["message"].is_string() ? body["message"].get<std::string>() : "";
  }
  if (protocol == "jupyter") {
    EXPECT_TRUE(body["reason"].is_string()) << reply.body;
    return body["message"].is_string() ? body["message"].get<std::string>() : "";
  }
  return reply.body;  // admin: plain text
}

class HttpFrontTest : public ::testing::Test {
 protected:
  // Starts a daemon with an HTTP front: with tokens for alice and bob, or
  // open on loopback (no tokens) with warden.test and kAllowedOrigin listed.
  void StartDaemon(bool tokens, const std::function<void(DaemonOptions&)>& adjust = nullptr) {
    char dir[] = "/tmp/warden-httpfront-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    DaemonOptions options;
    options.listen = {"unix:" + dir_ + "/w.sock"};
    options.http_listen = "127.0.0.1:0";
    if (tokens) {
      const std::string file = dir_ + "/tokens.json";
      std::ofstream(file) << json({{"tokens",
                                    {{{"token", kAlice}, {"tenant", "alice"}}, {{"token", kBob}, {"tenant", "bob"}}}}})
                                 .dump();
      ASSERT_EQ(chmod(file.c_str(), 0600), 0);
      options.auth.tokens_file = file;
    } else {
      options.allow_insecure_loopback = true;
    }
    // Listed hosts are checked with tokens too; the daemon with tokens
    // lists none, so that any Host reaches it.
    if (!tokens) options.http.allowed_hosts = {"warden.test"};
    options.http.allowed_origins = {kAllowedOrigin};
    options.pools = {{"python", 1, {}}, {"javascript", 0, {}}, {"bash", 0, {}}};
    // A range of its own: ctest runs the daemon tests side by side.
    options.executor.host_id_base = static_cast<uid_t>(5'000'000 + (getpid() % 4096) * 256);
    options.executor.host_id_count = 256;
    options.shutdown_grace_ms = 2'000;
    if (adjust) adjust(options);
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    ASSERT_TRUE(daemon_->Start().ok());
    port_ = daemon_->http_port();
    ASSERT_GT(port_, 0);
  }

  void TearDown() override {
    if (daemon_) daemon_->Shutdown(absl::Seconds(5));
    daemon_.reset();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  std::string Loopback() const { return absl::StrCat("127.0.0.1:", port_); }

  // One request on a fresh connection. Host is 127.0.0.1:PORT unless
  // `headers` gives one.
  Reply Send(const std::string& method, const std::string& target, const Headers& headers = {},
             const std::string& body = "") {
    net::io_context io;
    beast::tcp_stream stream(io);
    stream.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)));
    stream.expires_after(std::chrono::seconds(60));
    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
    req.set(bhttp::field::host, Loopback());
    for (const auto& [name, value] : headers) req.set(name, value);
    req.body() = body;
    req.prepare_payload();
    beast::error_code ec;
    bhttp::write(stream, req, ec);
    EXPECT_FALSE(ec) << ec.message();
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(stream, buffer, res, ec);
    EXPECT_FALSE(ec) << method << " " << target << ": " << ec.message();
    Reply reply;
    reply.status = res.result_int();
    for (const auto& field : res) {
      reply.headers[absl::AsciiStrToLower(std::string(field.name_string()))] = std::string(field.value());
    }
    reply.body = res.body();
    return reply;
  }

  // A WebSocket handshake, written out (Beast's client keeps a refusal's
  // answer to itself); the response, 101 or the refusal.
  Reply Upgrade(const std::string& target, const Headers& headers) {
    return Send("GET", target,
                Plus({{"Connection", "Upgrade"},
                      {"Upgrade", "websocket"},
                      {"Sec-WebSocket-Version", "13"},
                      {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}},
                     headers));
  }

  static Headers Plus(Headers a, const Headers& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  static std::string McpPing() { return R"({"jsonrpc": "2.0", "id": 1, "method": "ping"})"; }
  static std::string McpCall(const std::string& tool, const json& arguments, bool progress = false) {
    json params = {{"name", tool}, {"arguments", arguments}};
    if (progress) params["_meta"] = {{"progressToken", "p1"}};
    return json({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/call"}, {"params", params}}).dump();
  }
  static Headers McpHeaders(const std::string& token = "") {
    Headers h = {{"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}};
    if (!token.empty()) h.emplace_back("Authorization", absl::StrCat("Bearer ", token));
    return h;
  }
  static Headers E2bKey(const std::string& token) {
    Headers h = {{"Content-Type", "application/json"}};
    if (!token.empty()) h.emplace_back("X-API-KEY", token);
    return h;
  }
  static Headers Plane(const std::string& sandbox, const std::string& access_token) {
    Headers h = {{"Content-Type", "application/json"}, {"E2b-Sandbox-Id", sandbox}};
    if (!access_token.empty()) h.emplace_back("X-Access-Token", access_token);
    return h;
  }
  static Headers Jupyter(const std::string& token) {
    Headers h = {{"Content-Type", "application/json"}};
    if (!token.empty()) h.emplace_back("Authorization", absl::StrCat("token ", token));
    return h;
  }

  // A sandbox made through the E2B control plane: {id, access token}.
  std::pair<std::string, std::string> CreateSandbox(const std::string& token) {
    Reply r = Send("POST", "/sandboxes", E2bKey(token), "{}");
    EXPECT_EQ(r.status, 201u) << r.body;
    json body = r.Json();
    EXPECT_EQ(body["trafficAccessToken"], body["envdAccessToken"]) << r.body;
    return {body.value("sandboxID", ""), body.value("envdAccessToken", "")};
  }

  std::string StartKernel(const std::string& token) {
    Reply r = Send("POST", "/api/kernels", Jupyter(token), R"({"name": "python3"})");
    EXPECT_EQ(r.status, 201u) << r.body;
    return r.Json().value("id", "");
  }

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
  int port_ = 0;
};

// A request target for a route's pattern, parameters filled in.
std::string TargetOf(const http::Route& route, const std::string& param) {
  std::string path;
  for (const std::string& segment : route.segments) {
    absl::StrAppend(&path, "/", segment.size() > 2 && segment.front() == '{' ? param : segment);
  }
  return path.empty() ? "/" : path;
}

TEST_F(HttpFrontTest, OnAnOpenLoopbackDaemonEveryRouteRefusesAForeignHostAndAForeignOrigin) {
  StartDaemon(/*tokens=*/false);
  const http::Router* router = daemon_->http_router();
  ASSERT_NE(router, nullptr);
  std::set<std::string> protocols;
  for (const http::Route& route : router->routes()) {
    const std::string target = TargetOf(route, "x");
    const std::string what = absl::StrCat(route.protocol->name, " ", route.method, " ", target);
    protocols.insert(route.protocol->name);
    const Headers type = {{"Content-Type", "application/json"}};
    Reply host = Send(route.method, target, Plus(type, {{"Host", absl::StrCat("evil.example:", port_)}}), "{}");
    EXPECT_EQ(host.status, 403u) << what << ": " << host.body;
    EXPECT_THAT(MessageIn(route.protocol->name, host), HasSubstr("http.allowed_hosts")) << what;
    Reply origin = Send(route.method, target, Plus(type, {{"Origin", kEvilOrigin}}), "{}");
    EXPECT_EQ(origin.status, 403u) << what << ": " << origin.body;
    EXPECT_THAT(MessageIn(route.protocol->name, origin), HasSubstr("http.allowed_origins")) << what;
    EXPECT_EQ(origin.Header("Access-Control-Allow-Origin"), "") << what;
  }
  // The walk saw every protocol the front hosts.
  EXPECT_EQ(protocols, (std::set<std::string>{"admin", "mcp", "e2b", "envd", "jupyter", "ports"}));

  // The long-lived streams too: the Kernel Gateway WebSocket and MCP's SSE.
  const std::string kernel = StartKernel("");
  ASSERT_FALSE(kernel.empty());
  const std::string channels = absl::StrCat("/api/kernels/", kernel, "/channels");
  for (const Headers& foreign : {Headers{{"Origin", kEvilOrigin}}, Headers{{"Host", "evil.example"}}}) {
    Reply ws = Upgrade(channels, foreign);
    EXPECT_EQ(ws.status, 403u) << foreign[0].second;
    EXPECT_THAT(MessageIn("jupyter", ws), HasSubstr("http.allowed_")) << ws.body;
    Reply sse = Send("POST", "/mcp", Plus(McpHeaders(), foreign), McpCall("create_session", json::object(), true));
    EXPECT_EQ(sse.status, 403u) << sse.body;
    EXPECT_THAT(sse.Header("Content-Type"), Not(HasSubstr("event-stream")));
  }
  EXPECT_EQ(Upgrade(channels, {}).status, 101u) << "the same upgrade from loopback is served";
}

TEST_F(HttpFrontTest, ListedHostsAndOriginsAreServedOnEveryProtocolWithCors) {
  StartDaemon(/*tokens=*/false);
  for (const Headers& caller :
       {Headers{{"Host", absl::StrCat("warden.test:", port_)}, {"Origin", kAllowedOrigin}},
        Headers{{"Origin", "http://localhost:5173"}}}) {
    const std::string origin = caller.back().second;
    auto expect_cors = [&origin](const Reply& r, const std::string& what) {
      EXPECT_EQ(r.Header("Access-Control-Allow-Origin"), origin) << what;
      EXPECT_EQ(r.Header("Vary"), "Origin") << what;
    };
    Reply mcp = Send("POST", "/mcp", Plus(McpHeaders(), caller), McpPing());
    EXPECT_EQ(mcp.status, 200u) << mcp.body;
    expect_cors(mcp, "mcp");
    // MCP's SSE: progress notifications, then the response, as events.
    Reply sse = Send("POST", "/mcp", Plus(McpHeaders(), caller),
                     McpCall("execute_code", {{"code", "print(6 * 7)"}}, /*progress=*/true));
    EXPECT_EQ(sse.status, 200u) << sse.body;
    EXPECT_THAT(sse.Header("Content-Type"), HasSubstr("text/event-stream"));
    EXPECT_THAT(sse.body, HasSubstr("42"));
    expect_cors(sse, "mcp sse");

    Reply created = Send("POST", "/sandboxes", Plus(E2bKey(""), caller), "{}");
    ASSERT_EQ(created.status, 201u) << created.body;
    expect_cors(created, "e2b control");
    const std::string sandbox = created.Json()["sandboxID"], access = created.Json()["envdAccessToken"];
    Reply contexts = Send("GET", "/contexts", Plus(Plane(sandbox, access), caller));
    EXPECT_EQ(contexts.status, 200u) << contexts.body;
    expect_cors(contexts, "e2b plane");
    Reply processes = Send("POST", "/process.Process/List", Plus(Plane(sandbox, access), caller), "{}");
    EXPECT_EQ(processes.status, 200u) << processes.body;
    expect_cors(processes, "envd");
    EXPECT_EQ(Send("DELETE", absl::StrCat("/sandboxes/", sandbox), Plus(E2bKey(""), caller)).status, 204u);

    Reply kernel = Send("POST", "/api/kernels", Plus(Jupyter(""), caller), R"({"name": "python3"})");
    ASSERT_EQ(kernel.status, 201u) << kernel.body;
    expect_cors(kernel, "kernel gateway");
    EXPECT_EQ(kernel.Header("Access-Control-Expose-Headers"), "Location");
    const std::string id = kernel.Json()["id"];
    EXPECT_EQ(Upgrade(absl::StrCat("/api/kernels/", id, "/channels"), caller).status, 101u);
    EXPECT_EQ(Send("DELETE", absl::StrCat("/api/kernels/", id), Plus(Jupyter(""), caller)).status, 204u);
  }
}

TEST_F(HttpFrontTest, PreflightsGetWhatEachProtocolsBrowserClientsSendAndForeignOnesAre403) {
  StartDaemon(/*tokens=*/false);
  struct Case {
    std::string path, method, header;  // header: one the protocol's browser client sends
    std::string protocol;
  };
  for (const Case& c : {Case{"/mcp", "POST", "Mcp-Method", "mcp"}, Case{"/sandboxes", "POST", "X-API-KEY", "e2b"},
                        Case{"/execute", "POST", "X-Access-Token", "e2b"},
                        Case{"/contexts", "GET", "E2B-Traffic-Access-Token", "e2b"},
                        Case{"/process.Process/Start", "POST", "Connect-Protocol-Version", "envd"},
                        Case{"/api/kernels", "POST", "Authorization", "jupyter"}}) {
    const Headers ask = {{"Access-Control-Request-Method", c.method},
                         {"Access-Control-Request-Headers", absl::AsciiStrToLower(c.header)}};
    Reply allowed = Send("OPTIONS", c.path, Plus(ask, {{"Origin", kAllowedOrigin}}));
    EXPECT_EQ(allowed.status, 204u) << c.path << ": " << allowed.body;
    EXPECT_EQ(allowed.Header("Access-Control-Allow-Origin"), kAllowedOrigin) << c.path;
    EXPECT_THAT(allowed.Header("Access-Control-Allow-Methods"), HasSubstr(c.method)) << c.path;
    EXPECT_THAT(absl::AsciiStrToLower(allowed.Header("Access-Control-Allow-Headers")),
                HasSubstr(absl::AsciiStrToLower(c.header)))
        << c.path;
    Reply foreign = Send("OPTIONS", c.path, Plus(ask, {{"Origin", kEvilOrigin}}));
    EXPECT_EQ(foreign.status, 403u) << c.path;
    EXPECT_EQ(foreign.Header("Access-Control-Allow-Origin"), "") << c.path;
    EXPECT_THAT(MessageIn(c.protocol, foreign), HasSubstr("http.allowed_origins")) << c.path;
  }
}

TEST_F(HttpFrontTest, WithTokensEveryProtocolRefusesAMissingOrWrongTokenAndTheOriginIsStillChecked) {
  StartDaemon(/*tokens=*/true);
  for (const std::string token : {"", "wrong-token-0123456789abcdef"}) {
    Reply mcp = Send("POST", "/mcp", McpHeaders(token), McpPing());
    EXPECT_EQ(mcp.status, 401u) << mcp.body;
    EXPECT_THAT(MessageIn("mcp", mcp), HasSubstr("Authorization: Bearer"));
    Reply sse = Send("POST", "/mcp", McpHeaders(token), McpCall("create_session", json::object(), true));
    EXPECT_EQ(sse.status, 401u);
    Reply e2b = Send("POST", "/sandboxes", E2bKey(token), "{}");
    EXPECT_EQ(e2b.status, 401u) << e2b.body;
    EXPECT_THAT(MessageIn("e2b", e2b), HasSubstr("X-API-KEY"));
    EXPECT_EQ(Send("GET", "/sandboxes", E2bKey(token)).status, 401u);
    Reply kg = Send("POST", "/api/kernels", Jupyter(token), "{}");
    EXPECT_EQ(kg.status, 401u) << kg.body;
    EXPECT_THAT(MessageIn("jupyter", kg), HasSubstr("Authorization: token"));
    EXPECT_EQ(Send("GET", "/api/kernels", Jupyter(token)).status, 401u);
    EXPECT_EQ(Upgrade("/api/kernels/x/channels", Jupyter(token)).status, 401u);
    EXPECT_THAT(mcp.body + e2b.body + kg.body, Not(HasSubstr(kAlice)));
  }
  // With tokens the Host is not what tells callers apart; the Origin still is.
  EXPECT_EQ(Send("POST", "/mcp", Plus(McpHeaders(kAlice), {{"Host", "warden.example.com"}}), McpPing()).status, 200u);
  Reply origin = Send("POST", "/mcp", Plus(McpHeaders(kAlice), {{"Origin", kEvilOrigin}}), McpPing());
  EXPECT_EQ(origin.status, 403u);
  EXPECT_THAT(MessageIn("mcp", origin), HasSubstr("http.allowed_origins"));
}

TEST_F(HttpFrontTest, EveryE2bSandboxPlaneAndEnvdRouteRefusesAMissingOrWrongAccessToken) {
  StartDaemon(/*tokens=*/true);
  const auto [sandbox, access] = CreateSandbox(kAlice);
  ASSERT_FALSE(sandbox.empty());
  const auto [other, other_access] = CreateSandbox(kAlice);
  // The refusal /execute gives; every other route must give the same.
  Reply execute = Send("POST", "/execute", Plane(sandbox, ""), R"({"code": "1"})");
  ASSERT_EQ(execute.status, 404u) << execute.body;
  const std::string refusal = MessageIn("e2b", execute);
  ASSERT_THAT(refusal, HasSubstr("not known here with this access token"));

  int walked = 0;
  int volume_routes = 0;
  for (const http::Route& route : daemon_->http_router()->routes()) {
    const std::string& protocol = route.protocol->name;
    if ((protocol != "e2b" && protocol != "envd") || route.options.authenticate) continue;  // the API key's routes
    const std::string target = TargetOf(route, "x");
    const std::string what = absl::StrCat(route.method, " ", target);
    if (!route.segments.empty() && route.segments.front() == "volumecontent") {
      // A volume's content takes the volume's own token, never a sandbox's.
      for (const std::string& token : {std::string(), std::string("wrong-volume-token-0123"), access}) {
        Headers headers = {{"Content-Type", "application/json"}, {"E2b-Sandbox-Id", sandbox}};
        if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
        Reply r = Send(route.method, target, headers, "{}");
        EXPECT_EQ(r.status, 401u) << what << ": " << r.body;
        EXPECT_THAT(MessageIn(protocol, r), HasSubstr("the volume's token")) << what;
      }
      ++volume_routes;
      continue;
    }
    ++walked;
    for (const std::string& token : {std::string(), std::string("wrong-access-token-0123"), other_access}) {
      for (const char* header : {"X-Access-Token", "E2B-Traffic-Access-Token"}) {
        Headers headers = {{"Content-Type", "application/json"}, {"E2b-Sandbox-Id", sandbox}};
        if (!token.empty()) headers.emplace_back(header, token);
        Reply r = Send(route.method, target, headers, "{}");
        EXPECT_EQ(r.status, 404u) << what << " " << header << ": " << r.body;
        EXPECT_EQ(MessageIn(protocol, r), refusal) << what << " " << header;
      }
    }
    // With the token, the same request is no longer refused for it.
    Reply with = Send(route.method, target, Plane(sandbox, access), "{}");
    EXPECT_THAT(with.body, Not(HasSubstr("not known here with this access token"))) << what << ": " << with.body;
  }
  EXPECT_GE(walked, 8 + 15);  // the plane's 8 routes and envd's 15 at least
  EXPECT_EQ(volume_routes, 7);
  // The code interpreter SDK's contexts calls carry the traffic token alone.
  Reply contexts = Send("GET", "/contexts", {{"E2b-Sandbox-Id", sandbox}, {"E2B-Traffic-Access-Token", access}});
  EXPECT_EQ(contexts.status, 200u) << contexts.body;
}

TEST_F(HttpFrontTest, OneTenantCannotSeeUseOrEndAnothersSandboxKernelOrSession) {
  StartDaemon(/*tokens=*/true);
  // E2B: bob's key does not reach alice's sandbox, and without its access
  // token he cannot use its plane.
  const auto [sandbox, access] = CreateSandbox(kAlice);
  ASSERT_FALSE(sandbox.empty());
  const std::string sandbox_path = absl::StrCat("/sandboxes/", sandbox);
  EXPECT_EQ(Send("GET", sandbox_path, E2bKey(kBob)).status, 404u);
  EXPECT_EQ(Send("POST", sandbox_path + "/connect", E2bKey(kBob), "{}").status, 404u);
  EXPECT_EQ(Send("POST", sandbox_path + "/timeout", E2bKey(kBob), R"({"timeout": 1})").status, 404u);
  EXPECT_EQ(Send("DELETE", sandbox_path, E2bKey(kBob)).status, 404u);
  Reply bobs = Send("GET", "/sandboxes", E2bKey(kBob));
  EXPECT_EQ(bobs.Json(), json::array()) << bobs.body;
  const auto [bob_sandbox, bob_access] = CreateSandbox(kBob);
  EXPECT_EQ(Send("POST", "/execute", Plane(sandbox, bob_access), R"({"code": "1"})").status, 404u);

  // Kernel Gateway: alice's kernel is unknown to bob.
  const std::string kernel = StartKernel(kAlice);
  ASSERT_FALSE(kernel.empty());
  const std::string kernel_path = absl::StrCat("/api/kernels/", kernel);
  EXPECT_EQ(Send("GET", kernel_path, Jupyter(kBob)).status, 404u);
  EXPECT_EQ(Send("POST", kernel_path + "/interrupt", Jupyter(kBob)).status, 404u);
  EXPECT_EQ(Send("POST", kernel_path + "/restart", Jupyter(kBob)).status, 404u);
  EXPECT_EQ(Send("DELETE", kernel_path, Jupyter(kBob)).status, 404u);
  EXPECT_EQ(Upgrade(kernel_path + "/channels", Jupyter(kBob)).status, 404u);
  EXPECT_THAT(Send("GET", "/api/kernels", Jupyter(kBob)).body, Not(HasSubstr(kernel)));

  // MCP: alice's session is unknown to bob.
  Reply created = Send("POST", "/mcp", McpHeaders(kAlice), McpCall("create_session", json::object()));
  const std::string session = created.Json()["result"]["structuredContent"].value("session_id", "");
  ASSERT_FALSE(session.empty()) << created.body;
  for (const char* tool : {"execute_code", "list_files", "close_session"}) {
    json arguments = {{"session_id", session}};
    if (std::string(tool) == "execute_code") arguments["code"] = "1";
    Reply r = Send("POST", "/mcp", McpHeaders(kBob), McpCall(tool, arguments));
    EXPECT_EQ(r.Json()["result"]["isError"], true) << tool << ": " << r.body;
    EXPECT_THAT(r.body, HasSubstr("NOT_FOUND")) << tool;
  }

  // And all of alice's are untouched and hers to use.
  EXPECT_EQ(Send("GET", "/contexts", Plane(sandbox, access)).status, 200u);
  EXPECT_EQ(Send("GET", kernel_path, Jupyter(kAlice)).status, 200u);
  Reply ran =
      Send("POST", "/mcp", McpHeaders(kAlice), McpCall("execute_code", {{"code", "6*7"}, {"session_id", session}}));
  EXPECT_THAT(ran.body, HasSubstr("42"));
  EXPECT_EQ(Send("DELETE", sandbox_path, E2bKey(kAlice)).status, 204u);
  EXPECT_EQ(Send("DELETE", kernel_path, Jupyter(kAlice)).status, 204u);
}

// A real, unmodified HTTP client: libcurl, one request on a connection of
// its own. {status, body}; status 0 when the request failed.
std::pair<long, std::string> Curl(const std::string& method, const std::string& url, const std::string& body,
                                  const std::vector<std::string>& headers) {
  CURL* curl = curl_easy_init();
  std::string out;
  curl_slist* list = nullptr;
  for (const std::string& h : headers) list = curl_slist_append(list, h.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method != "GET") curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
  curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* sink) {
    static_cast<std::string*>(sink)->append(data, size * n);
    return size * n;
  });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &out);
  long status = 0;
  if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return {status, out};
}

// The E2B path a real client takes: create a sandbox, run a cell, kill it.
// Empty when every step answered as it should; else what went wrong.
std::string E2bRoundTrip(int port) {
  const std::string base = absl::StrCat("http://127.0.0.1:", port);
  auto [created, body] = Curl("POST", base + "/sandboxes", "{}", {"Content-Type: application/json"});
  if (created != 201) return absl::StrCat("create: ", created, " ", body);
  const json sandbox = json::parse(body, nullptr, false);
  const std::string id = sandbox.value("sandboxID", ""), access = sandbox.value("envdAccessToken", "");
  auto [ran, out] = Curl("POST", base + "/execute", R"js({"code": "print(6 * 7)"})js",
                         {"Content-Type: application/json", "E2b-Sandbox-Id: " + id, "X-Access-Token: " + access});
  if (ran != 200 || out.find("42") == std::string::npos) return absl::StrCat("execute: ", ran, " ", out);
  auto [killed, _] = Curl("DELETE", base + "/sandboxes/" + id, "", {});
  if (killed != 204) return absl::StrCat("kill: ", killed);
  return "";
}

TEST_F(HttpFrontTest, ThousandsOfHalfSentHeadsLeaveARealClientServed) {
  http::testing::RaiseDescriptorLimit();
  StartDaemon(/*tokens=*/false, [](DaemonOptions& o) {
    o.http.max_connections = 1000;
    o.http.head_timeout_ms = 600'000;  // the bound, not the deadline, must let the real client in
  });
  std::vector<std::unique_ptr<http::testing::RawSocket>> slow;
  for (int i = 0; i < 3000; ++i) {
    auto c = std::make_unique<http::testing::RawSocket>(port_);
    ASSERT_TRUE(c->ok()) << i;
    ASSERT_TRUE(c->Send("POST /sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: applica"));
    slow.push_back(std::move(c));
    if (i % 1000 == 999) {
      EXPECT_EQ(E2bRoundTrip(port_), "") << "beside " << i + 1 << " half-sent heads";
    }
  }
  EXPECT_LE(daemon_->http_connections(), 1001);
  int closed = 0;
  for (const auto& c : slow) closed += c->ClosedByServer() ? 1 : 0;
  EXPECT_GE(closed, 1900) << "the heads that waited longest made room";
  EXPECT_EQ(Curl("GET", absl::StrCat("http://127.0.0.1:", port_, "/api/kernelspecs"), "", {}).first, 200);
}

TEST_F(HttpFrontTest, IdleConnectionsAreHeldBesideARealClientAndClosedAfterTheIdleTimeout) {
  http::testing::RaiseDescriptorLimit();
  StartDaemon(/*tokens=*/false, [](DaemonOptions& o) { o.http.idle_timeout_ms = 3'000; });
  std::vector<std::unique_ptr<http::testing::RawSocket>> idle;
  for (int i = 0; i < 2000; ++i) {
    auto c = std::make_unique<http::testing::RawSocket>(port_);
    ASSERT_TRUE(c->ok()) << i;
    ASSERT_TRUE(c->Send("GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    ASSERT_THAT(c->ReadUntil("2.14.0\"}"), HasSubstr("2.14.0\"}")) << i;  // GET /api: {"gateway": ..., "version": ...}
    idle.push_back(std::move(c));
  }
  const absl::Time answered = absl::Now();
  EXPECT_EQ(E2bRoundTrip(port_), "") << "beside 2,000 idle connections";
  if (absl::Now() - answered < absl::Seconds(2)) {
    int open = 0;
    for (const auto& c : idle) open += c->ClosedByServer() ? 0 : 1;
    EXPECT_EQ(open, 2000) << "held until the idle timeout";
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  int closed = 0;
  while (absl::Now() < deadline) {
    closed = 0;
    for (const auto& c : idle) closed += c->ClosedByServer() ? 1 : 0;
    if (closed == 2000) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(closed, 2000) << "closed after http.idle_timeout_ms";
  EXPECT_GE(absl::Now() - answered, absl::Seconds(2));
}

}  // namespace
}  // namespace warden
