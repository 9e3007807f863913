// `warden mcp`: the MCP server over stdio, its tools calling the daemon
// through this CLI's stub and token. stdout carries only MCP messages.
#include "client/commands.h"
#include "client/exit_codes.h"
#include "fronts/mcp/mcp_server.h"
#include "fronts/mcp/mcp_stdio.h"
#include "fronts/mcp/mcp_tools.h"

namespace warden::cli {

int CommandRunner::operator()(const McpCommand&) {
  mcp::McpTools tools(stub_);
  mcp::McpServer server(tools);
  mcp::ServeStdio(server, io_.in, io_.out, token_);
  return kExitOk;
}

}  // namespace warden::cli
