// MCP's Streamable HTTP transport at /mcp on the HTTP front, for both eras
// (mcp_server.h): the legacy revisions up to 2025-11-25, and 2026-07-28,
// whose requests must mirror their body in headers (MCP-Protocol-Version,
// Mcp-Method, and Mcp-Name for tools/call; 400 with -32020 HeaderMismatch
// otherwise) and get 400 for an unsupported version (-32022) and 404 for an
// unknown method (-32601).
//   POST /mcp   one JSON-RPC message or batch. Requests are answered with
//               application/json, or with text/event-stream when a
//               tools/call asked for progress (the notifications, then the
//               response); notifications alone get 202 and no body.
//   GET, DELETE 405: no server-initiated stream and no HTTP session (state
//               lives in Warden sessions, named by the session_id argument).
// The client's "Authorization: Bearer TOKEN" is its Warden token. An Origin
// header must name a loopback host or one of allowed_origins (403
// otherwise), against DNS rebinding; without tokens the Host must be
// loopback as well.
#pragma once

#include <string>
#include <vector>

#include "fronts/http/router.h"
#include "fronts/mcp/mcp_server.h"

namespace warden::mcp {

struct McpHttpOptions {
  // Origins ("https://app.example.com") allowed besides loopback ones.
  std::vector<std::string> allowed_origins;
  // Refuse a Host header that is not loopback (when nothing else tells
  // callers apart: the daemon has no tokens).
  bool require_loopback_host = false;
  size_t max_body_bytes = 96 << 20;  // base64 uploads are 4/3 of the file
};

// `server` is not owned and outlives the router's use.
void AddMcpRoutes(http::Router& router, McpServer& server, McpHttpOptions options);

}  // namespace warden::mcp
