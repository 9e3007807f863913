// E2B's paths and Warden's: an E2B sandbox is a machine whose user's home
// and working directory, /home/user, is the Warden session's workspace.
// warden.v1 names files relative to the workspace, or, in such a session,
// absolutely anywhere in its sandbox.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace warden::e2b {

inline constexpr char kHome[] = "/home/user";

// "/home/user/a.txt", "/workspace/a.txt" or "a.txt" -> "a.txt"; "/home/user"
// -> "" (the workspace); any other absolute path as it is ("/tmp/x"). ""
// is refused with `empty_hint` (what to send instead).
absl::StatusOr<std::string> WorkspacePath(const std::string& path, const char* empty_hint);

// "a.txt" -> "/home/user/a.txt"; "" -> "/home/user"; "/tmp/x" -> "/tmp/x".
std::string HomePath(const std::string& workspace_path);

}  // namespace warden::e2b
