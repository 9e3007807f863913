#include "fronts/jupyter/kernel_ids.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace warden::jupyter {
namespace {

constexpr size_t kSessionHexDigits = 24;
constexpr absl::string_view kPadding = "00000000";  // the UUID's last 8 digits

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

}  // namespace

std::string KernelIdFromSessionId(absl::string_view session_id) {
  if (!absl::StartsWith(session_id, "s-")) return std::string(session_id);
  absl::string_view hex = session_id.substr(2);
  std::string node;  // a fleet's session: "-" + the node's id follows
  if (hex.size() > kSessionHexDigits + 1 && hex[kSessionHexDigits] == '-') {
    node = std::string(hex.substr(kSessionHexDigits + 1));
    if (node.find('_') != std::string::npos) return std::string(session_id);
    absl::StrReplaceAll({{"-", "_"}}, &node);
    hex = hex.substr(0, kSessionHexDigits);
  }
  if (hex.size() != kSessionHexDigits || !IsLowerHex(hex)) return std::string(session_id);
  return absl::StrCat(hex.substr(0, 8), "-", hex.substr(8, 4), "-", hex.substr(12, 4), "-",
                      hex.substr(16, 4), "-", hex.substr(20, 4), kPadding, node.empty() ? "" : "_", node);
}

std::string SessionIdFromKernelId(absl::string_view kernel_id) {
  std::string node;
  if (kernel_id.size() > 37 && kernel_id[36] == '_') {
    node = std::string(kernel_id.substr(37));
    if (node.find('-') != std::string::npos) return std::string(kernel_id);
    absl::StrReplaceAll({{"_", "-"}}, &node);
    const std::string session = SessionIdFromKernelId(kernel_id.substr(0, 36));
    if (session == kernel_id.substr(0, 36)) return std::string(kernel_id);
    return absl::StrCat(session, "-", node);
  }
  // 8-4-4-4-12 with the dashes where a UUID has them.
  if (kernel_id.size() != 36 || kernel_id[8] != '-' || kernel_id[13] != '-' || kernel_id[18] != '-' ||
      kernel_id[23] != '-') {
    return std::string(kernel_id);
  }
  const std::string hex = absl::StrCat(kernel_id.substr(0, 8), kernel_id.substr(9, 4), kernel_id.substr(14, 4),
                                       kernel_id.substr(19, 4), kernel_id.substr(24, 12));
  if (!IsLowerHex(hex) || !absl::EndsWith(hex, kPadding)) return std::string(kernel_id);
  return absl::StrCat("s-", hex.substr(0, kSessionHexDigits));
}

}  // namespace warden::jupyter
