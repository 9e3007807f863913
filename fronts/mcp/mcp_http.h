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
// The client's "Authorization: Bearer TOKEN" is its Warden token. Which
// hosts and origins may call (DNS rebinding) is the HTTP server's policy,
// the same for every protocol (fronts/http/access_policy.h); its refusals
// come as JSON-RPC errors with 403.
#pragma once

#include "fronts/http/router.h"
#include "fronts/mcp/mcp_server.h"

namespace warden::mcp {

struct McpHttpOptions {
  size_t max_body_bytes = 96 << 20;  // base64 uploads are 4/3 of the file
};

// `server` is not owned and outlives the router's use.
void AddMcpRoutes(http::Router& router, McpServer& server, McpHttpOptions options);

}  // namespace warden::mcp
