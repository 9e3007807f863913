#include "fronts/mcp/mcp_stdio.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "fronts/mcp/json_rpc.h"

namespace warden::mcp {

void ServeStdio(McpServer& server, std::istream& in, std::ostream& out, const std::string& token,
                size_t max_line_bytes) {
  absl::Mutex out_mu;
  auto write = [&](const nlohmann::json& message) {
    absl::MutexLock lock(&out_mu);
    out << message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    out.flush();
  };
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (line.size() > max_line_bytes) {
      write(RpcError(nullptr, kInvalidRequest,
                     absl::StrCat("the message exceeds ", max_line_bytes, " bytes; send less at once")));
      continue;
    }
    if (auto response = server.HandleText(line, token, write)) write(*response);
  }
}

}  // namespace warden::mcp
