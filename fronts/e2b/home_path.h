// E2B's paths and Warden's: an E2B sandbox is a machine whose user's home
// and working directory, /home/user, is the Warden session's workspace.
// warden.v1 names files relative to the workspace, or, in such a session,
// absolutely anywhere in its sandbox.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace warden::e2b {

inline constexpr char kHome[] = "/home/user";

// A path as envd resolves it (its ExpandAndResolve): "~" and "~/x" are in
// the user's home, a relative path is taken from the home ("dir" ->
// "/home/user/dir", "../x" -> "/home/x"), an absolute one stays as it is,
// "" stays "". "~other" (another user's home) is refused.
absl::StatusOr<std::string> ResolveHome(const std::string& path);

// "/home/user/a.txt", "/workspace/a.txt", "~/a.txt" or "a.txt" -> "a.txt";
// "/home/user" -> "" (the workspace); any other path as ResolveHome makes
// it ("/tmp/x"). "" is refused with `empty_hint` (what to send instead).
absl::StatusOr<std::string> WorkspacePath(const std::string& path, const char* empty_hint);

// "a.txt" -> "/home/user/a.txt"; "" -> "/home/user"; "/tmp/x" -> "/tmp/x".
std::string HomePath(const std::string& workspace_path);

}  // namespace warden::e2b
