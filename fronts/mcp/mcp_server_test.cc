// McpServer and McpTools over a fake warden.v1 Executor (a real gRPC server
// in this process answering from canned data): the JSON-RPC rules, the
// handshake, the translation of each tool to warden.v1 and back, and bad
// input. The real daemon behind them: tests/protocols/mcp.test.mjs and
// tests/mcp_daemon_test.cc.
#include "fronts/mcp/mcp_server.h"

#include <memory>
#include <sstream>
#include <tuple>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/synchronization/mutex.h"
#include "fronts/mcp/json_rpc.h"
#include "fronts/mcp/mcp_stdio.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace warden::mcp {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// Answers Execute and ExecuteStream from `next`, and remembers what it was
// asked and with which "authorization".
class FakeExecutor final : public v1::Executor::Service {
 public:
  grpc::Status Execute(grpc::ServerContext* ctx, const v1::ExecuteRequest* request,
                       v1::ExecuteResponse* response) override {
    Remember(ctx, *request);
    if (request->session_id() == "gone") return grpc::Status(grpc::StatusCode::NOT_FOUND, "no session 'gone'");
    *response = next;
    return grpc::Status::OK;
  }
  grpc::Status ExecuteStream(grpc::ServerContext* ctx, const v1::ExecuteRequest* request,
                             grpc::ServerWriter<v1::ExecuteEvent>* writer) override {
    Remember(ctx, *request);
    for (const char* chunk : {"a\n", "b\n"}) {
      v1::ExecuteEvent event;
      event.set_stdout(chunk);
      writer->Write(event);
    }
    v1::ExecuteEvent summary;
    *summary.mutable_summary() = next;
    writer->Write(summary);
    return grpc::Status::OK;
  }
  grpc::Status CreateSession(grpc::ServerContext* ctx, const v1::CreateSessionRequest* request,
                             v1::Session* session) override {
    session->set_id("s-1");
    session->set_language(request->language());
    return grpc::Status::OK;
  }

  void Remember(grpc::ServerContext* ctx, const v1::ExecuteRequest& request) {
    absl::MutexLock lock(&mu);
    last = request;
    auto it = ctx->client_metadata().find("authorization");
    authorization = it == ctx->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
  }

  v1::ExecuteResponse next;
  absl::Mutex mu;
  v1::ExecuteRequest last;
  std::string authorization;
};

class McpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    channel_ = server_->InProcessChannel(grpc::ChannelArguments());
    stub_ = v1::Executor::NewStub(channel_);
    tools_ = std::make_unique<McpTools>(stub_.get());
    mcp_ = std::make_unique<McpServer>(*tools_);
  }
  void TearDown() override { server_->Shutdown(); }

  json Request(const std::string& method, json params = json::object(), const std::string& token = "") {
    std::optional<json> response =
        mcp_->Handle({{"jsonrpc", "2.0"}, {"id", 1}, {"method", method}, {"params", params}}, token, nullptr);
    EXPECT_TRUE(response.has_value());
    return response.value_or(json());
  }
  json Call(const std::string& tool, json arguments, const std::string& token = "") {
    return Request("tools/call", {{"name", tool}, {"arguments", arguments}}, token);
  }

  FakeExecutor fake_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Executor::Stub> stub_;
  std::unique_ptr<McpTools> tools_;
  std::unique_ptr<McpServer> mcp_;
};

TEST_F(McpServerTest, InitializeNegotiatesTheProtocolVersion) {
  for (const char* version : {"2025-11-25", "2025-06-18", "2025-03-26"}) {
    json r = Request("initialize", {{"protocolVersion", version}, {"capabilities", json::object()},
                                    {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
    EXPECT_EQ(r["result"]["protocolVersion"], version);
    EXPECT_EQ(r["result"]["serverInfo"]["name"], "warden");
    EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  }
  EXPECT_EQ(Request("initialize", {{"protocolVersion", "1999-01-01"}})["result"]["protocolVersion"], "2025-11-25");
}

// A 2026-07-28 request: no handshake, its version and capabilities in _meta.
json Modern(const std::string& method, json params = json::object(), const std::string& version = "2026-07-28") {
  params["_meta"] = {{"io.modelcontextprotocol/protocolVersion", version},
                     {"io.modelcontextprotocol/clientCapabilities", json::object()}};
  return {{"jsonrpc", "2.0"}, {"id", 7}, {"method", method}, {"params", params}};
}

TEST_F(McpServerTest, ModernRequestsNeedNoHandshakeAndSayTheirResultType) {
  json discover = *mcp_->Handle(Modern("server/discover"), "", nullptr);
  EXPECT_EQ(discover["result"]["supportedVersions"],
            json({"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}));
  EXPECT_TRUE(discover["result"]["capabilities"].contains("tools"));
  EXPECT_EQ(discover["result"]["resultType"], "complete");
  EXPECT_EQ(discover["result"]["cacheScope"], "public");
  EXPECT_GT(discover["result"]["ttlMs"].get<int64_t>(), 0);
  EXPECT_EQ(discover["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "warden");

  json list = *mcp_->Handle(Modern("tools/list"), "", nullptr);
  EXPECT_EQ(list["result"]["tools"].size(), 8u);
  EXPECT_EQ(list["result"]["resultType"], "complete");
  EXPECT_TRUE(list["result"].contains("ttlMs"));

  json call = *mcp_->Handle(Modern("tools/call", {{"name", "create_session"}, {"arguments", json::object()}}),
                            "", nullptr);
  EXPECT_EQ(call["result"]["structuredContent"]["session_id"], "s-1");
  EXPECT_EQ(call["result"]["resultType"], "complete");

  EXPECT_EQ((*mcp_->Handle(Modern("prompts/list"), "", nullptr))["error"]["code"], kMethodNotFound);
}

TEST_F(McpServerTest, AnUnsupportedModernVersionListsTheSupportedOnes) {
  json r = *mcp_->Handle(Modern("tools/list", json::object(), "1900-01-01"), "", nullptr);
  EXPECT_EQ(r["id"], 7);
  EXPECT_EQ(r["error"]["code"], kUnsupportedProtocolVersion);
  EXPECT_EQ(r["error"]["data"]["requested"], "1900-01-01");
  EXPECT_EQ(r["error"]["data"]["supported"][0], "2026-07-28");
  EXPECT_EQ(McpServer::ModernVersion(Modern("ping", json::object(), "1900-01-01")), "1900-01-01");
  EXPECT_FALSE(McpServer::ModernVersion({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}}).has_value());
}

TEST_F(McpServerTest, LegacyResultsAreUnchangedBesideTheModernEra) {
  // A legacy client's result has no resultType (2025-11-25 has none), also
  // when its _meta names a legacy version.
  json legacy = Request("tools/list");
  EXPECT_FALSE(legacy["result"].contains("resultType"));
  json named = *mcp_->Handle(Modern("tools/list", json::object(), "2025-11-25"), "", nullptr);
  EXPECT_FALSE(named["result"].contains("resultType"));
  EXPECT_EQ(named["result"]["tools"].size(), 8u);
  // initialize still negotiates the legacy era.
  EXPECT_EQ(Request("initialize", {{"protocolVersion", "2025-11-25"}})["result"]["protocolVersion"], "2025-11-25");
}

TEST_F(McpServerTest, MalformedJsonIsAParseError) {
  std::optional<json> r = mcp_->HandleText("{\"jsonrpc\": \"2.0\", \"id\": 1, ", "", nullptr);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)["error"]["code"], kParseError);
  EXPECT_TRUE((*r)["id"].is_null());
}

TEST_F(McpServerTest, InvalidRequestsAndUnknownMethodsGetJsonRpcErrors) {
  EXPECT_EQ((*mcp_->Handle(json::array({1, 2}), "", nullptr))[0]["error"]["code"], kInvalidRequest);
  EXPECT_EQ((*mcp_->Handle({{"id", 1}, {"method", "ping"}}, "", nullptr))["error"]["code"], kInvalidRequest);
  EXPECT_EQ((*mcp_->Handle({{"jsonrpc", "2.0"}, {"id", 1}, {"method", 5}}, "", nullptr))["error"]["code"],
            kInvalidRequest);
  EXPECT_EQ((*mcp_->Handle({{"jsonrpc", "2.0"}, {"id", {1}}, {"method", "ping"}}, "", nullptr))["error"]["code"],
            kInvalidRequest);
  json r = Request("prompts/list");
  EXPECT_EQ(r["error"]["code"], kMethodNotFound);
  EXPECT_THAT(r["error"]["message"].get<std::string>(), HasSubstr("tools/call"));
}

TEST_F(McpServerTest, NotificationsAndClientResponsesGetNoAnswer) {
  EXPECT_FALSE(mcp_->Handle({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, "", nullptr));
  EXPECT_FALSE(mcp_->Handle({{"jsonrpc", "2.0"}, {"id", 3}, {"result", json::object()}}, "", nullptr));
  EXPECT_FALSE(McpServer::HasRequest({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}}));
  EXPECT_TRUE(McpServer::HasRequest(json::array({{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}}})));
}

TEST_F(McpServerTest, ABatchGetsAnArrayOfTheResponses) {
  json batch = json::array({{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}},
                            {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}},
                            {{"jsonrpc", "2.0"}, {"id", "two"}, {"method", "ping"}}});
  json r = *mcp_->Handle(batch, "", nullptr);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["id"], 1);
  EXPECT_EQ(r[1]["id"], "two");
}

TEST_F(McpServerTest, ToolsListHasEveryToolWithSchemas) {
  json tools = Request("tools/list")["result"]["tools"];
  std::vector<std::string> names;
  for (const json& t : tools) {
    names.push_back(t["name"]);
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t["name"];
    EXPECT_FALSE(t["description"].get<std::string>().empty());
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("execute_code", "create_session", "close_session",
                                                     "interrupt_session", "restart_session", "upload_file",
                                                     "download_file", "list_files"));
}

TEST_F(McpServerTest, ExecuteCodeTranslatesTheRequestAndForwardsTheToken) {
  fake_.next.set_outcome(v1::OUTCOME_OK);
  json r = Call("execute_code", {{"code", "1+1"}, {"language", "js"}, {"timeout_ms", 1500}}, "secret-token-123456");
  ASSERT_TRUE(r.contains("result")) << r;
  absl::MutexLock lock(&fake_.mu);
  EXPECT_EQ(fake_.last.code(), "1+1");
  EXPECT_EQ(fake_.last.language(), v1::LANGUAGE_JAVASCRIPT);
  EXPECT_EQ(fake_.last.limits().wall_ms(), 1500);
  EXPECT_EQ(fake_.authorization, "Bearer secret-token-123456");
}

TEST_F(McpServerTest, ExecuteCodeResultHasTextImagesAndStructuredContent) {
  fake_.next.set_outcome(v1::OUTCOME_OK);
  fake_.next.set_stdout("out\n");
  fake_.next.set_execution_count(3);
  v1::Result* plot = fake_.next.add_results();
  (*plot->mutable_data())["image/png"] = std::string("\x89PNG\r\n", 6);
  (*plot->mutable_data())["text/plain"] = "<Figure>";
  v1::Result* value = fake_.next.add_results();
  value->set_is_result(true);
  (*value->mutable_data())["text/plain"] = "2";
  json result = Call("execute_code", {{"code", "x"}})["result"];
  EXPECT_FALSE(result.contains("isError"));
  json content = result["content"];
  ASSERT_EQ(content.size(), 3u) << content;
  EXPECT_EQ(content[0], json({{"type", "text"}, {"text", "out\n"}}));
  EXPECT_EQ(content[1]["type"], "image");
  EXPECT_EQ(content[1]["mimeType"], "image/png");
  EXPECT_EQ(content[1]["data"], absl::Base64Escape(std::string("\x89PNG\r\n", 6)));
  EXPECT_EQ(content[2], json({{"type", "text"}, {"text", "2"}}));
  json s = result["structuredContent"];
  EXPECT_EQ(s["outcome"], "ok");
  EXPECT_EQ(s["execution_count"], 3);
  EXPECT_EQ(s["results"][1], json({{"data", {{"text/plain", "2"}}}, {"is_result", true}}));
}

TEST_F(McpServerTest, AnExceptionOrALimitIsAToolError) {
  fake_.next.set_outcome(v1::OUTCOME_ERROR);
  fake_.next.mutable_error()->set_name("ZeroDivisionError");
  fake_.next.mutable_error()->set_value("division by zero");
  fake_.next.mutable_error()->add_traceback("line 1");
  json result = Call("execute_code", {{"code", "1/0"}})["result"];
  EXPECT_EQ(result["isError"], true);
  EXPECT_EQ(result["content"].back()["text"], "ZeroDivisionError: division by zero\nline 1");
  EXPECT_EQ(result["structuredContent"]["error"]["name"], "ZeroDivisionError");

  fake_.next.Clear();
  fake_.next.set_outcome(v1::OUTCOME_MEMORY_LIMIT);
  fake_.next.set_message("the sandbox used its 512 MiB");
  result = Call("execute_code", {{"code", "x"}})["result"];
  EXPECT_EQ(result["isError"], true);
  EXPECT_EQ(result["content"].back()["text"], "memory_limit: the sandbox used its 512 MiB");
  EXPECT_EQ(result["structuredContent"]["outcome"], "memory_limit");
}

TEST_F(McpServerTest, AnUnknownSessionIsAToolErrorWithAHint) {
  json result = Call("execute_code", {{"code", "1"}, {"session_id", "gone"}})["result"];
  EXPECT_EQ(result["isError"], true);
  EXPECT_THAT(result["content"][0]["text"].get<std::string>(), HasSubstr("NOT_FOUND: no session 'gone'"));
  EXPECT_THAT(result["content"][0]["text"].get<std::string>(), HasSubstr("create_session"));
}

TEST_F(McpServerTest, UnknownToolsAndBadArgumentsAreInvalidParams) {
  for (const auto& [tool, args, message] : std::vector<std::tuple<std::string, json, std::string>>{
           {"rm_rf", json::object(), "unknown tool 'rm_rf'"},
           {"execute_code", json::object(), "'code' is required"},
           {"execute_code", {{"code", 5}}, "'code' must be a string"},
           {"execute_code", {{"code", "1"}, {"language", "cobol"}}, "unknown language 'cobol'"},
           {"execute_code", {{"code", "1"}, {"timeout_ms", -5}}, "positive integer"},
           {"execute_code", {{"code", "1"}, {"tiemout_ms", 5}}, "unknown argument 'tiemout_ms'"},
           {"upload_file", {{"session_id", "s"}, {"path", "p"}, {"content_base64", "!!!"}}, "not valid base64"},
           {"close_session", json::object(), "'session_id' is required"},
       }) {
    json r = Call(tool, args);
    EXPECT_EQ(r["error"]["code"], kInvalidParams) << tool << " " << args;
    EXPECT_THAT(r["error"]["message"].get<std::string>(), HasSubstr(message)) << tool << " " << args;
  }
  EXPECT_EQ(Request("tools/call", {{"arguments", json::object()}})["error"]["code"], kInvalidParams);
}

TEST_F(McpServerTest, ProgressTokenStreamsOutputAsNotifications) {
  fake_.next.set_outcome(v1::OUTCOME_OK);
  fake_.next.set_stdout("a\nb\n");
  std::vector<json> notes;
  json request = {{"jsonrpc", "2.0"},
                  {"id", 4},
                  {"method", "tools/call"},
                  {"params", {{"name", "execute_code"}, {"arguments", {{"code", "x"}}}, {"_meta", {{"progressToken", "p1"}}}}}};
  EXPECT_EQ(McpServer::ProgressToken(request), "p1");
  json r = *mcp_->Handle(request, "", [&notes](const json& n) { notes.push_back(n); });
  EXPECT_EQ(r["result"]["structuredContent"]["stdout"], "a\nb\n");
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0]["method"], "notifications/progress");
  EXPECT_EQ(notes[0]["params"], json({{"progressToken", "p1"}, {"progress", 1}, {"message", "a\n"}}));
  EXPECT_EQ(notes[1]["params"]["progress"], 2);
}

TEST_F(McpServerTest, StdioAnswersLineByLineAndSurvivesGarbage) {
  std::istringstream in(
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"
      "not json\n"
      "\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"create_session\"}}\n");
  std::ostringstream out;
  ServeStdio(*mcp_, in, out, "");
  std::vector<json> lines;
  std::istringstream written(out.str());
  for (std::string line; std::getline(written, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_EQ(lines[0], json({{"jsonrpc", "2.0"}, {"id", 1}, {"result", json::object()}}));
  EXPECT_EQ(lines[1]["error"]["code"], kParseError);
  EXPECT_EQ(lines[2]["result"]["structuredContent"]["session_id"], "s-1");
}

}  // namespace
}  // namespace warden::mcp
