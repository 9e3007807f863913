#include "fronts/e2b/home_path.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace warden::e2b {

absl::StatusOr<std::string> WorkspacePath(const std::string& path, const char* empty_hint) {
  for (absl::string_view root : {absl::string_view(kHome), absl::string_view("/workspace")}) {
    if (path == root || path == absl::StrCat(root, "/")) return std::string();
    if (absl::StartsWith(path, absl::StrCat(root, "/"))) return path.substr(root.size() + 1);
  }
  if (path.empty()) return absl::InvalidArgumentError(empty_hint);
  std::string out = path;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string HomePath(const std::string& workspace_path) {
  if (absl::StartsWith(workspace_path, "/")) return workspace_path;
  return workspace_path.empty() ? std::string(kHome) : absl::StrCat(kHome, "/", workspace_path);
}

}  // namespace warden::e2b
