// MCP's stdio transport, as desktop hosts launch `warden mcp`: one JSON-RPC
// message per line on `in`, each answer (and each notification) as one line
// on `out`; nothing else is written to `out`. Returns at end of input.
#pragma once

#include <istream>
#include <ostream>
#include <string>

#include "fronts/mcp/mcp_server.h"

namespace warden::mcp {

// Lines longer than `max_line_bytes` are answered with an error and skipped.
void ServeStdio(McpServer& server, std::istream& in, std::ostream& out, const std::string& token,
                size_t max_line_bytes = 96 << 20);

}  // namespace warden::mcp
