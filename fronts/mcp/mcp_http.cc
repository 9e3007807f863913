#include "fronts/mcp/mcp_http.h"

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fronts/http/credentials.h"
#include "fronts/http/exchange.h"
#include "fronts/mcp/json_rpc.h"

namespace warden::mcp {
namespace {

using nlohmann::json;

// The JSON-RPC error body HTTP-level failures carry, so MCP clients show the
// message: {"jsonrpc": "2.0", "id": null, "error": {...}}.
http::Response RpcErrorResponse(unsigned status, int code, const std::string& message) {
  return http::Response::Json(status, RpcError(nullptr, code, message));
}

// A legacy request's MCP-Protocol-Version header, when it has one, names a
// revision this server speaks.
absl::Status CheckLegacyVersion(const http::Request& request) {
  const std::string version = request.Header("MCP-Protocol-Version");
  if (version.empty() || version == "2024-11-05" || IsLegacyProtocolVersion(version)) {
    return absl::OkStatus();
  }
  if (version == kModernProtocolVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MCP-Protocol-Version is ", version, " but the body's params._meta has no \"", kProtocolVersionKey,
        "\": a ", version, " request names its version there too"));
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported MCP-Protocol-Version ", version,
                                                 "; this server speaks ", absl::StrJoin(AllProtocolVersions(), ", ")));
}

// The modern-era version a message names, when it is not a legacy one
// (those are served as legacy, headers included).
std::optional<std::string> ModernEra(const json& message) {
  std::optional<std::string> version = McpServer::ModernVersion(message);
  if (!version || IsLegacyProtocolVersion(*version)) return std::nullopt;
  return version;
}

// A header value as the 2026-07-28 transport encodes it: plain, or
// "=?base64?...?=" for what is not plain ASCII.
std::optional<std::string> DecodeHeaderValue(const std::string& value) {
  if (!absl::StartsWith(value, "=?base64?") || !absl::EndsWith(value, "?=")) return value;
  std::string decoded;
  if (!absl::Base64Unescape(absl::string_view(value).substr(9, value.size() - 11), &decoded)) return std::nullopt;
  return decoded;
}

// 2026-07-28 Streamable HTTP: the headers mirror the body (version, method,
// and the tool's name for tools/call), so that intermediaries routing on
// them see what the server runs. Any mismatch is a HeaderMismatch.
absl::Status CheckModernHeaders(const http::Request& request, const json& message) {
  const json& params = message["params"];
  const std::string body_version = params["_meta"][kProtocolVersionKey].is_string()
                                       ? params["_meta"][kProtocolVersionKey].get<std::string>()
                                       : params["_meta"][kProtocolVersionKey].dump();
  const std::string version = request.Header("MCP-Protocol-Version");
  if (version != body_version) {
    return absl::InvalidArgumentError(
        version.empty() ? "Header mismatch: the MCP-Protocol-Version header is required"
                        : absl::StrCat("Header mismatch: MCP-Protocol-Version header value '", version,
                                       "' does not match body value '", body_version, "'"));
  }
  const std::string body_method = message.value("method", json()).is_string() ? message["method"].get<std::string>() : "";
  const std::string method = request.Header("Mcp-Method");
  if (method != body_method) {
    return absl::InvalidArgumentError(
        method.empty() ? "Header mismatch: the Mcp-Method header is required"
                       : absl::StrCat("Header mismatch: Mcp-Method header value '", method,
                                      "' does not match body value '", body_method, "'"));
  }
  if (body_method == "tools/call") {
    const std::string body_name = params.value("name", json()).is_string() ? params["name"].get<std::string>() : "";
    const std::string raw = request.Header("Mcp-Name");
    std::optional<std::string> name = DecodeHeaderValue(raw);
    if (raw.empty() || !name || *name != body_name) {
      return absl::InvalidArgumentError(
          raw.empty() ? "Header mismatch: the Mcp-Name header is required for tools/call"
                      : absl::StrCat("Header mismatch: Mcp-Name header value '", raw,
                                     "' does not match body value '", body_name, "'"));
    }
  }
  return absl::OkStatus();
}

// The HTTP status of a modern-era answer: 400 for a version the server
// does not speak, 404 for a method it does not have (so that a dual-era
// client tells a modern server from a legacy one), 200 otherwise.
unsigned ModernStatus(const json& response) {
  if (!response.is_object() || !response.contains("error")) return 200;
  const json& code = response["error"]["code"];
  if (code == kUnsupportedProtocolVersion || code == kHeaderMismatch) return 400;
  if (code == kMethodNotFound) return 404;
  return 200;
}

}  // namespace

void AddMcpRoutes(http::Router& router, McpServer& server, McpHttpOptions options) {
  auto protocol = std::make_shared<http::Protocol>();
  protocol->name = "mcp";
  protocol->find_token = http::BearerToken;
  // What MCP's browser clients send and read (the TypeScript SDK's
  // StreamableHTTPClientTransport, the Inspector).
  protocol->cors_request_headers = {"Authorization", "Content-Type", "Accept", "MCP-Protocol-Version",
                                    "Mcp-Session-Id", "Mcp-Method", "Mcp-Name", "Last-Event-ID"};
  protocol->cors_expose_headers = {"Mcp-Session-Id", "MCP-Protocol-Version", "WWW-Authenticate"};
  protocol->render_error = [](unsigned status, const absl::Status& error, const http::Request&) {
    std::string message(error.message());
    if (status == 401) {
      message = absl::StrCat(message, "; send the Warden token as \"Authorization: Bearer TOKEN\"");
    }
    http::Response r =
        RpcErrorResponse(status, status == 400 || status == 403 ? kInvalidRequest : kInternalError, message);
    if (status == 401) r.With("WWW-Authenticate", "Bearer realm=\"warden\"");
    return r;
  };

  http::RouteOptions route_options;
  route_options.max_body_bytes = options.max_body_bytes;
  router.Add(
      protocol, "POST", "/mcp",
      [&server](http::Request& request, http::Exchange& exchange) -> absl::Status {
        json message = json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
        if (message.is_discarded()) {
          return exchange.Send(
              RpcErrorResponse(400, kParseError, "parse error: the request body is not valid JSON"));
        }
        const std::optional<std::string> modern = ModernEra(message);
        if (absl::Status s = modern ? CheckModernHeaders(request, message) : CheckLegacyVersion(request); !s.ok()) {
          return exchange.Send(http::Response::Json(
              400, RpcError(message.is_object() ? message.value("id", json()) : json(),
                            modern ? kHeaderMismatch : kInvalidRequest, std::string(s.message()))));
        }
        if (!McpServer::HasRequest(message)) {
          (void)server.Handle(message, request.token, nullptr);
          http::Response accepted;
          accepted.status = 202;
          return exchange.Send(accepted);
        }
        const bool wants_progress = !McpServer::ProgressToken(message).is_null() &&
                                    absl::StrContains(request.Header("Accept"), "text/event-stream") &&
                                    (!modern || *modern == kModernProtocolVersion);
        if (!wants_progress) {
          std::optional<json> response = server.Handle(message, request.token, nullptr);
          if (!response) response = json::object();
          return exchange.Send(http::Response::Json(modern ? ModernStatus(*response) : 200, *response));
        }
        // Progress: the notifications as server-sent events while the code
        // runs, then the response as the last event.
        absl::StatusOr<std::unique_ptr<http::ResponseStream>> stream =
            exchange.StartStream(200, "text/event-stream");
        if (!stream.ok()) return stream.status();
        auto send = [&stream](const json& m) {
          (void)(*stream)->Write(
              http::SseEvent(m.dump(-1, ' ', false, json::error_handler_t::replace), "message"));
        };
        std::optional<json> response = server.Handle(message, request.token, send);
        if (response) send(*response);
        return (*stream)->Finish();
      },
      route_options);
  for (const char* method : {"GET", "DELETE"}) {
    router.Add(protocol, method, "/mcp", [](http::Request&, http::Exchange& exchange) {
      http::Response r = RpcErrorResponse(
          405, kInvalidRequest,
          "this server has no server-initiated stream and no HTTP sessions: POST JSON-RPC messages to /mcp");
      r.With("Allow", "POST");
      return exchange.Send(r);
    });
  }
  router.Claim(protocol, "/mcp");
}

}  // namespace warden::mcp
