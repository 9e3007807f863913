#include "fronts/mcp/mcp_server.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fronts/mcp/json_rpc.h"

namespace warden::mcp {

using nlohmann::json;

namespace {

constexpr char kInstructions[] =
    "Warden runs code in isolated sandboxes without network access. execute_code without a session_id is "
    "one-shot and keeps nothing; create_session gives a session_id whose variables and files persist across "
    "execute_code calls. Plots come back as PNG images.";

// How long a client or a shared cache may keep the tool list and the
// discovery result (2026-07-28 CacheableResult): they change only with the
// binary, and hold nothing of a tenant.
constexpr int64_t kCacheTtlMs = 5 * 60 * 1000;

bool IsRequest(const json& m) { return m.is_object() && m.contains("method") && m.contains("id"); }

json ServerInfo() { return {{"name", "warden"}, {"title", "Warden code sandbox"}, {"version", "0.1.0"}}; }


}  // namespace

bool IsLegacyProtocolVersion(const std::string& version) {
  const auto& legacy = SupportedProtocolVersions();
  return std::find(legacy.begin(), legacy.end(), version) != legacy.end();
}

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

std::optional<std::string> McpServer::ModernVersion(const json& message) {
  if (!message.is_object()) return std::nullopt;
  auto params = message.find("params");
  if (params == message.end() || !params->is_object()) return std::nullopt;
  auto meta = params->find("_meta");
  if (meta == params->end() || !meta->is_object()) return std::nullopt;
  auto version = meta->find(kProtocolVersionKey);
  if (version == meta->end()) return std::nullopt;
  return version->is_string() ? version->get<std::string>() : version->dump();
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
  // A request naming a legacy version in its _meta is served as legacy;
  // server/discover is modern whatever it carries (dual-era clients probe
  // with it).
  std::optional<std::string> version = ModernVersion(message);
  if ((version && !IsLegacyProtocolVersion(*version)) || method == "server/discover") {
    return HandleModern(id, method, version.value_or(kModernProtocolVersion), params, token, notify,
                        ProgressToken(message));
  }
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

json McpServer::HandleModern(const json& id, const std::string& method, const std::string& version,
                             const json& params, const std::string& token, const Notify& notify,
                             const json& progress_token) {
  if (version != kModernProtocolVersion) {
    json error = RpcError(id, kUnsupportedProtocolVersion,
                          absl::StrCat("Unsupported protocol version ", version, ": this server speaks ",
                                       absl::StrJoin(AllProtocolVersions(), ", ")));
    error["error"]["data"] = {{"supported", AllProtocolVersions()}, {"requested", version}};
    return error;
  }
  json result;
  if (method == "server/discover") {
    result = {{"supportedVersions", AllProtocolVersions()},
              {"capabilities", {{"tools", {{"listChanged", false}}}}},
              {"instructions", kInstructions},
              {"ttlMs", kCacheTtlMs},
              {"cacheScope", "public"}};
  } else if (method == "ping") {
    result = json::object();
  } else if (method == "tools/list") {
    result = tools_.List();
    result["ttlMs"] = kCacheTtlMs;
    result["cacheScope"] = "public";
  } else if (method == "tools/call") {
    absl::StatusOr<json> called = tools_.Call(params, token, progress_token, notify);
    if (!called.ok()) return RpcError(id, RpcCodeFor(called.status()), std::string(called.status().message()));
    result = *std::move(called);
  } else {
    return RpcError(id, kMethodNotFound,
                    absl::StrCat("method not found: ", method, "; this server has server/discover, ping, "
                                 "tools/list and tools/call"));
  }
  result["resultType"] = "complete";
  result["_meta"]["io.modelcontextprotocol/serverInfo"] = ServerInfo();
  return RpcResult(id, std::move(result));
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
          {"serverInfo", ServerInfo()},
          {"instructions", kInstructions}};
}

}  // namespace warden::mcp
