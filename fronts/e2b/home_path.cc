#include "fronts/e2b/home_path.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace warden::e2b {

absl::StatusOr<std::string> ResolveHome(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  std::string relative = path;
  if (path[0] == '~') {
    if (path.size() > 1 && path[1] != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' names another user's home: the sandbox has one user, whose home is ", kHome));
    }
    relative = path.substr(1);
  }
  // filepath.Join and Abs: the home, then each component, lexically.
  std::vector<std::string> parts = absl::StrSplit(absl::string_view(kHome).substr(1), '/');
  for (absl::string_view part : absl::StrSplit(relative, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.emplace_back(part);
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

absl::StatusOr<std::string> WorkspacePath(const std::string& asked, const char* empty_hint) {
  if (asked.empty()) return absl::InvalidArgumentError(empty_hint);
  absl::StatusOr<std::string> resolved = ResolveHome(asked);
  if (!resolved.ok()) return resolved.status();
  const std::string& path = *resolved;
  for (absl::string_view root : {absl::string_view(kHome), absl::string_view("/workspace")}) {
    if (path == root || path == absl::StrCat(root, "/")) return std::string();
    if (absl::StartsWith(path, absl::StrCat(root, "/"))) return path.substr(root.size() + 1);
  }
  std::string out = path;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string HomePath(const std::string& workspace_path) {
  if (absl::StartsWith(workspace_path, "/")) return workspace_path;
  return workspace_path.empty() ? std::string(kHome) : absl::StrCat(kHome, "/", workspace_path);
}

}  // namespace warden::e2b
