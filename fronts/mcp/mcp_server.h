// McpServer: the Model Context Protocol over any transport. It takes one
// JSON-RPC message (or a batch) at a time and answers it; the transports
// (mcp_http.h for Streamable HTTP at /mcp, mcp_stdio.h for `warden mcp`)
// only move bytes. Dual-era: the legacy revisions (2025-11-25 with the
// initialize handshake, negotiating down to 2025-06-18 and 2025-03-26) and
// the modern, stateless 2026-07-28 revision, in which every request names
// its version in params._meta["io.modelcontextprotocol/protocolVersion"],
// there is no handshake, server/discover says what the server speaks and
// every result carries resultType. Methods: initialize (legacy), ping,
// server/discover, tools/list and tools/call (the tools: mcp_tools.h).
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

inline constexpr char kLatestProtocolVersion[] = "2025-11-25";  // newest with a handshake
inline constexpr char kModernProtocolVersion[] = "2026-07-28";  // stateless, per-request _meta
inline constexpr char kProtocolVersionKey[] = "io.modelcontextprotocol/protocolVersion";
// The legacy revisions, newest first; an initialize asking for another gets
// the newest.
inline const std::vector<std::string>& SupportedProtocolVersions() {
  static const std::vector<std::string> versions = {"2025-11-25", "2025-06-18", "2025-03-26"};
  return versions;
}
// Whether `version` is one of the legacy revisions served.
bool IsLegacyProtocolVersion(const std::string& version);
// Every revision served, modern first (server/discover's supportedVersions
// and the data of an UnsupportedProtocolVersion error).
inline const std::vector<std::string>& AllProtocolVersions() {
  static const std::vector<std::string> versions = {kModernProtocolVersion, "2025-11-25", "2025-06-18",
                                                    "2025-03-26"};
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
  // The protocol version a modern (2026-07-28-era) request names in its
  // params._meta, or nullopt for a legacy message (or a batch). Whatever
  // the value, even one not served: Handle answers that with -32022.
  static std::optional<std::string> ModernVersion(const nlohmann::json& message);

 private:
  std::optional<nlohmann::json> HandleOne(const nlohmann::json& message, const std::string& token,
                                          const Notify& notify);
  nlohmann::json Initialize(const nlohmann::json& params) const;
  // A request of the modern era (`version` from its _meta).
  nlohmann::json HandleModern(const nlohmann::json& id, const std::string& method, const std::string& version,
                              const nlohmann::json& params, const std::string& token, const Notify& notify,
                              const nlohmann::json& progress_token);

  McpTools& tools_;
};

}  // namespace warden::mcp
