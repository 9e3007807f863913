// JSON-RPC 2.0 as MCP uses it: the error codes and the shapes of answers.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace warden::mcp {

inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
// MCP's own codes (2026-07-28 schema).
inline constexpr int kHeaderMismatch = -32020;
inline constexpr int kUnsupportedProtocolVersion = -32022;

// {"jsonrpc": "2.0", "id": id, "result": result}
nlohmann::json RpcResult(const nlohmann::json& id, nlohmann::json result);
// {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}
nlohmann::json RpcError(const nlohmann::json& id, int code, const std::string& message);
// The JSON-RPC code for a failure: INVALID_ARGUMENT -32602, UNIMPLEMENTED
// -32601, anything else -32603 (the message says what went wrong).
int RpcCodeFor(const absl::Status& status);

}  // namespace warden::mcp
