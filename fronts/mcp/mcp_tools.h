// McpTools: Warden's MCP tools and their translation to warden.v1. Each
// call goes to the Executor stub with the client's token; nothing here
// knows how sessions are run.
//
//   execute_code       {code, language?, session_id?, timeout_ms?}
//   create_session     {language?}              -> {session_id}
//   close_session, interrupt_session, restart_session {session_id}
//   upload_file        {session_id, path, content_base64}
//   download_file      {session_id, path}       -> an embedded resource blob
//   list_files         {session_id, path?}
//
// What the user's code did (an exception, a timeout, an OOM) is a result
// with isError: true, for the model to read and correct; arguments that do
// not fit the schema, and unknown tools, are JSON-RPC errors (-32602).
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "warden/v1/executor.grpc.pb.h"

namespace warden::mcp {

// Sends one JSON-RPC notification to the client being served.
using Notify = std::function<void(const nlohmann::json& notification)>;

struct McpToolsOptions {
  // Largest file download_file returns; the embedded blob is base64, so a
  // response is about 4/3 of this.
  int64_t max_download_bytes = 32 << 20;
};

class McpTools {
 public:
  // `stub` is not owned and outlives the tools.
  explicit McpTools(v1::Executor::StubInterface* stub, McpToolsOptions options = {})
      : stub_(stub), options_(options) {}

  // The tools/list result: {"tools": [...]}, with schemas.
  nlohmann::json List() const;

  // The tools/call result for {name, arguments}. InvalidArgument for an
  // unknown tool or arguments that do not fit; a result with isError for
  // everything that went wrong in the call. `progress_token` (non-null)
  // asks for notifications/progress with the output as it comes.
  absl::StatusOr<nlohmann::json> Call(const nlohmann::json& params, const std::string& token,
                                      const nlohmann::json& progress_token, const Notify& notify);

 private:
  absl::StatusOr<nlohmann::json> ExecuteCode(const nlohmann::json& args, const std::string& token,
                                             const nlohmann::json& progress_token, const Notify& notify);
  absl::StatusOr<nlohmann::json> CreateSession(const nlohmann::json& args, const std::string& token);
  absl::StatusOr<nlohmann::json> CloseSession(const nlohmann::json& args, const std::string& token);
  absl::StatusOr<nlohmann::json> InterruptSession(const nlohmann::json& args, const std::string& token);
  absl::StatusOr<nlohmann::json> RestartSession(const nlohmann::json& args, const std::string& token);
  absl::StatusOr<nlohmann::json> UploadFile(const nlohmann::json& args, const std::string& token);
  absl::StatusOr<nlohmann::json> DownloadFile(const nlohmann::json& args, const std::string& token);
  absl::StatusOr<nlohmann::json> ListFiles(const nlohmann::json& args, const std::string& token);

  v1::Executor::StubInterface* stub_;  // not owned
  const McpToolsOptions options_;
};

}  // namespace warden::mcp
