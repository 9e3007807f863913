#include "fronts/mcp/mcp_server.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "fronts/mcp/json_rpc.h"

namespace warden::mcp {

using nlohmann::json;

namespace {

constexpr char kInstructions[] =
    "Warden runs code in isolated sandboxes without network access. execute_code without a session_id is "
    "one-shot and keeps nothing; create_session gives a session_id whose variables and files persist across "
    "execute_code calls. Plots come back as PNG images.";

bool IsRequest(const json& m) { return m.is_object() && m.contains("method") && m.contains("id"); }

}  // namespace

bool McpServer::HasRequest(const json& message) {
  if (message.is_array()) return std::any_of(message.begin(), message.end(), IsRequest);
  return IsRequest(message);
}

json McpServer::ProgressToken(const json& message) {
  if (!IsRequest(message) || message["method"] != "tools/call") return nullptr;
  const json& params = message.value("params", json::object());
  if (!params.is_object()) return nullptr;
  auto meta = params.find("_meta");
  if (meta == params.end() || !meta->is_object()) return nullptr;
  auto token = meta->find("progressToken");
  if (token == meta->end() || !(token->is_string() || token->is_number_integer())) return nullptr;
  return *token;
}

std::optional<json> McpServer::HandleText(absl::string_view text, const std::string& token, const Notify& notify) {
  json message = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) {
    return RpcError(nullptr, kParseError, "parse error: the message is not valid JSON");
  }
  return Handle(message, token, notify);
}

std::optional<json> McpServer::Handle(const json& message, const std::string& token, const Notify& notify) {
  if (!message.is_array()) return HandleOne(message, token, notify);
  if (message.empty()) return RpcError(nullptr, kInvalidRequest, "invalid request: an empty batch");
  json responses = json::array();
  for (const json& one : message) {
    if (auto response = HandleOne(one, token, notify)) responses.push_back(*std::move(response));
  }
  if (responses.empty()) return std::nullopt;
  return responses;
}

std::optional<json> McpServer::HandleOne(const json& message, const std::string& token, const Notify& notify) {
  if (!message.is_object() || message.value("jsonrpc", json()) != "2.0") {
    return RpcError(nullptr, kInvalidRequest, "invalid request: expected a JSON-RPC 2.0 object with \"jsonrpc\": \"2.0\"");
  }
  const auto method_it = message.find("method");
  const bool has_id = message.contains("id");
  const json id = has_id ? message["id"] : json();
  if (method_it == message.end()) {
    // A client's response (we send no requests) or junk: nothing to answer.
    if (message.contains("result") || message.contains("error")) return std::nullopt;
    return RpcError(id, kInvalidRequest, "invalid request: no \"method\"");
  }
  if (!method_it->is_string()) return RpcError(id, kInvalidRequest, "invalid request: \"method\" must be a string");
  if (has_id && !(id.is_string() || id.is_number_integer())) {
    return RpcError(nullptr, kInvalidRequest, "invalid request: \"id\" must be a string or an integer");
  }
  const std::string method = method_it->get<std::string>();
  const json params = message.value("params", json::object());
  if (!has_id) return std::nullopt;  // notifications: initialized, cancelled, ... need no answer
  if (!params.is_object()) return RpcError(id, kInvalidParams, "invalid params: \"params\" must be an object");

  if (method == "initialize") return RpcResult(id, Initialize(params));
  if (method == "ping") return RpcResult(id, json::object());
  if (method == "tools/list") return RpcResult(id, tools_.List());
  if (method == "tools/call") {
    absl::StatusOr<json> result = tools_.Call(params, token, ProgressToken(message), notify);
    if (!result.ok()) return RpcError(id, RpcCodeFor(result.status()), std::string(result.status().message()));
    return RpcResult(id, *std::move(result));
  }
  return RpcError(id, kMethodNotFound,
                  absl::StrCat("method not found: ", method, "; this server has initialize, ping, tools/list and "
                               "tools/call"));
}

json McpServer::Initialize(const json& params) const {
  std::string version = kLatestProtocolVersion;
  if (auto it = params.find("protocolVersion"); it != params.end() && it->is_string()) {
    const auto& supported = SupportedProtocolVersions();
    if (std::find(supported.begin(), supported.end(), it->get<std::string>()) != supported.end()) {
      version = it->get<std::string>();
    }
  }
  return {{"protocolVersion", version},
          {"capabilities", {{"tools", {{"listChanged", false}}}}},
          {"serverInfo", {{"name", "warden"}, {"title", "Warden code sandbox"}, {"version", "0.1.0"}}},
          {"instructions", kInstructions}};
}

}  // namespace warden::mcp
