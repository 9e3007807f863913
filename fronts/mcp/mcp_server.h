// McpServer: the Model Context Protocol over any transport. It takes one
// JSON-RPC message (or a batch) at a time and answers it; the transports
// (mcp_http.h for Streamable HTTP at /mcp, mcp_stdio.h for `warden mcp`)
// only move bytes. Protocol revision 2025-11-25 with the initialize
// handshake, negotiating down to 2025-06-18 and 2025-03-26; methods
// initialize, ping, tools/list and tools/call (the tools: mcp_tools.h).
//
// Stateless between messages: what persists is a Warden session, named by
// the session_id tool argument, so any number of clients and transports can
// share one McpServer.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fronts/mcp/mcp_tools.h"
#include "nlohmann/json.hpp"

namespace warden::mcp {

inline constexpr char kLatestProtocolVersion[] = "2025-11-25";
// Newest first; an initialize asking for another gets the newest.
inline const std::vector<std::string>& SupportedProtocolVersions() {
  static const std::vector<std::string> versions = {"2025-11-25", "2025-06-18", "2025-03-26"};
  return versions;
}

class McpServer {
 public:
  // `tools` is not owned and outlives the server.
  explicit McpServer(McpTools& tools) : tools_(tools) {}

  // Answers one parsed message: a request gets its response; a
  // notification or a client's response gets nothing (nullopt). A batch
  // (an array, 2025-03-26) gets an array of the responses. `token` is the
  // client's credential, passed on to warden.v1; `notify` sends a
  // notification (progress) to this client while a request runs.
  std::optional<nlohmann::json> Handle(const nlohmann::json& message, const std::string& token,
                                       const Notify& notify);
  // The same from text; malformed JSON gets the -32700 parse error.
  std::optional<nlohmann::json> HandleText(absl::string_view text, const std::string& token,
                                           const Notify& notify);

  // Whether the message holds at least one request (as opposed to only
  // notifications and responses), which is what decides HTTP's 202.
  static bool HasRequest(const nlohmann::json& message);
  // The progress token of a tools/call request, or null.
  static nlohmann::json ProgressToken(const nlohmann::json& message);

 private:
  std::optional<nlohmann::json> HandleOne(const nlohmann::json& message, const std::string& token,
                                          const Notify& notify);
  nlohmann::json Initialize(const nlohmann::json& params) const;

  McpTools& tools_;
};

}  // namespace warden::mcp
