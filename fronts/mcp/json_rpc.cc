#include "fronts/mcp/json_rpc.h"

namespace warden::mcp {

nlohmann::json RpcResult(const nlohmann::json& id, nlohmann::json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

nlohmann::json RpcError(const nlohmann::json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

int RpcCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return kInvalidParams;
    case absl::StatusCode::kUnimplemented:
      return kMethodNotFound;
    default:
      return kInternalError;
  }
}

}  // namespace warden::mcp
