// JSON-RPC messages from an MCP client (fronts/mcp), as text, through
// McpServer::HandleText with a real McpTools over an in-process gRPC
// channel. The executor behind it answers every Execute with output made
// of the request's own bytes (reversed too, so not UTF-8), as a sandboxed
// program may print anything. Every input gets nothing (a notification) or
// an answer that serialises to JSON parseable again; nothing crashes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fronts/mcp/mcp_server.h"
#include "fronts/mcp/mcp_tools.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "tests/fuzz/fuzz_check.h"
#include "warden/v1/executor.grpc.pb.h"

namespace {

namespace v1 = warden::v1;

// Every RPC it does not override answers UNIMPLEMENTED, which the tools
// must turn into an isError result like any other failure.
class EchoExecutor final : public v1::Executor::Service {
 public:
  grpc::Status Execute(grpc::ServerContext*, const v1::ExecuteRequest* request,
                       v1::ExecuteResponse* response) override {
    Fill(request->code(), response);
    return grpc::Status::OK;
  }
  grpc::Status ExecuteStream(grpc::ServerContext*, const v1::ExecuteRequest* request,
                             grpc::ServerWriter<v1::ExecuteEvent>* writer) override {
    v1::ExecuteEvent chunk;
    chunk.set_stdout(request->code());
    writer->Write(chunk);
    v1::ExecuteEvent summary;
    Fill(request->code(), summary.mutable_summary());
    writer->Write(summary);
    return grpc::Status::OK;
  }
  grpc::Status CreateSession(grpc::ServerContext*, const v1::CreateSessionRequest* request,
                             v1::Session* session) override {
    session->set_id("s-1");
    session->set_language(request->language());
    return grpc::Status::OK;
  }

 private:
  static void Fill(const std::string& code, v1::ExecuteResponse* response) {
    const std::string reversed(code.rbegin(), code.rend());
    response->set_stdout(code);
    response->set_stderr(reversed);
    auto* result = response->add_results();
    (*result->mutable_data())["text/plain"] = reversed;
    (*result->mutable_data())["image/png"] = code;
    // Error's fields are proto strings, UTF-8 by contract (the engine
    // repairs what a kernel sends); the request's code is UTF-8 already.
    response->mutable_error()->set_name(code);
    response->mutable_error()->set_value(code);
    response->mutable_error()->add_traceback(code);
  }
};

struct Harness {
  EchoExecutor executor;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Executor::Stub> stub;
  std::unique_ptr<warden::mcp::McpTools> tools;
  std::unique_ptr<warden::mcp::McpServer> mcp;
};

Harness& TheHarness() {
  static Harness* h = [] {
    auto* harness = new Harness;
    grpc::ServerBuilder builder;
    builder.RegisterService(&harness->executor);
    harness->server = builder.BuildAndStart();
    FUZZ_CHECK(harness->server != nullptr);
    harness->stub = v1::Executor::NewStub(harness->server->InProcessChannel(grpc::ChannelArguments()));
    harness->tools = std::make_unique<warden::mcp::McpTools>(harness->stub.get());
    harness->mcp = std::make_unique<warden::mcp::McpServer>(*harness->tools);
    return harness;
  }();
  return *h;
}

std::string Dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Harness& h = TheHarness();
  const std::string text(reinterpret_cast<const char*>(data), size);
  int notifications = 0;
  auto answer = h.mcp->HandleText(text, "token", [&notifications](const nlohmann::json& n) {
    FUZZ_CHECK(nlohmann::json::accept(Dump(n)));
    ++notifications;
  });
  if (answer.has_value()) FUZZ_CHECK(nlohmann::json::accept(Dump(*answer)));
  return 0;
}
