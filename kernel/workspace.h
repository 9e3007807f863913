// Workspace files: reading, writing and listing files beneath a directory
// that hostile code controls, from the supervisor (as root), safely.
//
// Every path is resolved with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
// | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) relative to a directory fd, so
// no symlink, "..", magic link or mount point planted by the sandboxed code
// can lead outside the workspace, and no check-then-use race exists.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sandbox/unique_fd.h"

namespace warden {

// Acts as the sandbox's user for file access, on this thread only, while it
// lives: fsuid/fsgid are per-thread in Linux (setfsuid(2)), and leaving fsuid
// 0 also drops root's DAC override. Files it creates belong to that user, and
// a tmpfs owned by the sandbox's user namespace accepts them (an unmapped
// owner, such as host root, fails with EOVERFLOW).
class ScopedFsIds {
 public:
  ScopedFsIds(uid_t uid, gid_t gid);
  ~ScopedFsIds();
  ScopedFsIds(const ScopedFsIds&) = delete;
  ScopedFsIds& operator=(const ScopedFsIds&) = delete;

 private:
  uid_t old_uid_;
  gid_t old_gid_;
};

// Rejects absolute paths, "..", ".", empty components and NUL bytes.
// "" (the workspace itself) is allowed only where `allow_root`.
absl::Status ValidateWorkspacePath(const std::string& path, bool allow_root = false);

// Opens `path` beneath `root_fd` with `flags` (O_CREAT allowed), never
// following a symlink.
absl::StatusOr<UniqueFd> OpenBeneath(int root_fd, const std::string& path, int flags,
                                     mode_t mode = 0);

// Writes `data` to `path` (parents created). Use under ScopedFsIds.
absl::Status WriteWorkspaceFile(int root_fd, const std::string& path, const std::string& data,
                                int64_t max_bytes);

// Reads a regular file of at most max_bytes.
absl::StatusOr<std::string> ReadWorkspaceFile(int root_fd, const std::string& path,
                                              int64_t max_bytes);

struct WorkspaceListing {
  std::string path;  // relative to the root
  char type;         // 'f' file, 'd' directory, 'l' symlink (not followed), 'o' other
  int64_t size;
  uint32_t mode = 0;  // permission bits
  int64_t modified_unix_ms = 0;
  std::string symlink_target;  // for 'l' (StatWorkspacePath only)
};
// Lists `dir` recursively (symlinks listed, never followed), at most
// `max_entries` entries and `max_depth` levels below `dir` (0: all, up to 64).
absl::StatusOr<std::vector<WorkspaceListing>> ListWorkspace(int root_fd, const std::string& dir,
                                                            size_t max_entries = 10'000,
                                                            int max_depth = 0);

// The entry `path` names ("" for the root), a symlink itself rather than
// what it points to. Use these under ScopedFsIds, like the file functions.
absl::StatusOr<WorkspaceListing> StatWorkspacePath(int root_fd, const std::string& path);
// Creates directory `path` and its missing parents; ALREADY_EXISTS if it is there.
absl::StatusOr<WorkspaceListing> MakeWorkspaceDirectory(int root_fd, const std::string& path);
// rename(2) of `from` to `to` beneath the root (missing parents of `to` created).
absl::StatusOr<WorkspaceListing> MoveWorkspacePath(int root_fd, const std::string& from,
                                                   const std::string& to);
// Removes `path`: a file, a symlink itself, or a directory and all it holds
// (never crossing into another mount). The root itself is refused.
absl::Status RemoveWorkspacePath(int root_fd, const std::string& path);

}  // namespace warden
