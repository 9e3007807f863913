#include "fronts/mcp/mcp_http.h"

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fronts/http/credentials.h"
#include "fronts/http/exchange.h"
#include "fronts/mcp/json_rpc.h"

namespace warden::mcp {
namespace {

using nlohmann::json;

// The host of "http://HOST:PORT/..." or of a Host header "HOST:PORT".
std::string HostOf(absl::string_view text) {
  if (const size_t scheme = text.find("://"); scheme != absl::string_view::npos) text.remove_prefix(scheme + 3);
  text = text.substr(0, text.find('/'));
  if (absl::StartsWith(text, "[")) return std::string(text.substr(0, text.find(']') + 1));
  return absl::AsciiStrToLower(text.substr(0, text.rfind(':')));
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "127.0.0.1" || host == "[::1]";
}

// The JSON-RPC error body HTTP-level failures carry, so MCP clients show the
// message: {"jsonrpc": "2.0", "id": null, "error": {...}}.
http::Response RpcErrorResponse(unsigned status, int code, const std::string& message) {
  return http::Response::Json(status, RpcError(nullptr, code, message));
}

}  // namespace

void AddMcpRoutes(http::Router& router, McpServer& server, McpHttpOptions options) {
  auto protocol = std::make_shared<http::Protocol>();
  protocol->name = "mcp";
  protocol->find_token = http::BearerToken;
  protocol->render_error = [](unsigned status, const absl::Status& error, const http::Request&) {
    std::string message(error.message());
    if (status == 401) {
      message = absl::StrCat(message, "; send the Warden token as \"Authorization: Bearer TOKEN\"");
    }
    http::Response r = RpcErrorResponse(status, status == 400 ? kInvalidRequest : kInternalError, message);
    if (status == 401) r.With("WWW-Authenticate", "Bearer realm=\"warden\"");
    return r;
  };

  auto origin_ok = [options](const http::Request& request) -> absl::Status {
    const std::string origin = request.Header("Origin");
    if (!origin.empty() && !IsLoopbackHost(HostOf(origin)) &&
        std::find(options.allowed_origins.begin(), options.allowed_origins.end(), origin) ==
            options.allowed_origins.end()) {
      return absl::PermissionDeniedError(
          absl::StrCat("Origin ", origin, " is not allowed (DNS rebinding protection): only loopback origins are"));
    }
    if (options.require_loopback_host && !IsLoopbackHost(HostOf(request.Header("Host")))) {
      return absl::PermissionDeniedError(absl::StrCat("Host ", request.Header("Host"),
                                                      " is not allowed (DNS rebinding protection): connect as "
                                                      "localhost, 127.0.0.1 or [::1]"));
    }
    return absl::OkStatus();
  };

  http::RouteOptions route_options;
  route_options.max_body_bytes = options.max_body_bytes;
  router.Add(
      protocol, "POST", "/mcp",
      [&server, origin_ok](http::Request& request, http::Exchange& exchange) -> absl::Status {
        if (absl::Status s = origin_ok(request); !s.ok()) {
          return exchange.Send(RpcErrorResponse(403, kInvalidRequest, std::string(s.message())));
        }
        const std::string version = request.Header("MCP-Protocol-Version");
        const auto& supported = SupportedProtocolVersions();
        if (!version.empty() && std::find(supported.begin(), supported.end(), version) == supported.end() &&
            version != "2024-11-05") {
          return exchange.Send(RpcErrorResponse(
              400, kInvalidRequest,
              absl::StrCat("unsupported MCP-Protocol-Version ", version, "; this server speaks 2025-11-25, "
                           "2025-06-18 and 2025-03-26")));
        }
        json message = json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
        if (message.is_discarded()) {
          return exchange.Send(
              RpcErrorResponse(400, kParseError, "parse error: the request body is not valid JSON"));
        }
        if (!McpServer::HasRequest(message)) {
          (void)server.Handle(message, request.token, nullptr);
          http::Response accepted;
          accepted.status = 202;
          return exchange.Send(accepted);
        }
        const bool wants_progress = !McpServer::ProgressToken(message).is_null() &&
                                    absl::StrContains(request.Header("Accept"), "text/event-stream");
        if (!wants_progress) {
          std::optional<json> response = server.Handle(message, request.token, nullptr);
          return exchange.Send(http::Response::Json(200, response ? *response : json::object()));
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
