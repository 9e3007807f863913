// Workspace files: reading, writing and listing files beneath a directory
// that hostile code controls, from the supervisor (as root), safely.
//
// Every path is resolved with openat2 relative to a directory fd, so no
// symlink, "..", magic link or mount point planted by the sandboxed code can
// lead outside it, and no check-then-use race exists. Two ways (Resolve):
// kBeneath (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
// RESOLVE_NO_XDEV), for a workspace of its own: no symlink is followed and
// no mount crossed at all; kInRoot (RESOLVE_IN_ROOT |
// RESOLVE_NO_MAGICLINKS), for a machine's whole filesystem (the fd is its
// root): paths resolve as they do inside the sandbox - symlinks followed,
// absolute ones and ".." from its root, its mounts crossed - and never out
// of it.
#pragma once

#include <sys/types.h>

#include <map>
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

enum class Resolve { kBeneath, kInRoot };

// Rejects absolute paths, "..", ".", empty components and NUL bytes.
// "" (the workspace itself) is allowed only where `allow_root`.
absl::Status ValidateWorkspacePath(const std::string& path, bool allow_root = false);

// Opens `path` beneath `root_fd` with `flags` (O_CREAT allowed); a symlink
// as the last component is never followed with kBeneath.
absl::StatusOr<UniqueFd> OpenBeneath(int root_fd, const std::string& path, int flags,
                                     mode_t mode = 0, Resolve resolve = Resolve::kBeneath);

// A file's metadata: its extended attributes user.e2b.KEY, by KEY.
using FileMetadata = std::map<std::string, std::string>;
// What one file's metadata may hold, E2B's bound (envd's
// MaxMetadataTotalLen, ext4's one block of xattrs): the names with their
// "user.e2b." prefix and the values, of all its entries together. Written
// metadata is checked against it; what a sandbox set beyond it itself is
// not read (ListWorkspace, StatWorkspacePath), so that describing a file
// never costs the daemon more than this.
inline constexpr size_t kMaxFileMetadataBytes = 4096;
// Keys of 1-246 bytes (255 with the prefix) without NUL or '/', keys and
// values UTF-8, all together within kMaxFileMetadataBytes.
absl::Status ValidateFileMetadata(const FileMetadata& metadata);

// Opens `path` (parents created) for writing: a regular file, created or
// truncated, its metadata replaced by `metadata` (none: cleared). Use
// under ScopedFsIds; what is written through the fd needs no more.
absl::StatusOr<UniqueFd> OpenWorkspaceFileToWrite(int root_fd, const std::string& path, Resolve resolve,
                                                  const FileMetadata& metadata);
// Writes all of `data` at the fd's position; `path` names the file in errors
// (RESOURCE_EXHAUSTED when its filesystem is full).
absl::Status WriteToWorkspaceFile(int fd, absl::string_view data, const std::string& path);

// Writes `data` to `path` (parents created) with `metadata`, which replaces
// whatever metadata the file had (none: it is cleared). Use under
// ScopedFsIds.
absl::Status WriteWorkspaceFile(int root_fd, const std::string& path, const std::string& data,
                                int64_t max_bytes, Resolve resolve = Resolve::kBeneath,
                                const FileMetadata& metadata = {});

// Reads a regular file of at most max_bytes.
absl::StatusOr<std::string> ReadWorkspaceFile(int root_fd, const std::string& path,
                                              int64_t max_bytes, Resolve resolve = Resolve::kBeneath);

struct WorkspaceListing {
  std::string path;  // relative to the root
  char type;         // 'f' file, 'd' directory, 'l' symlink (not followed), 'o' other
  int64_t size;      // st_size: a file's length, what a directory reports
  uint32_t mode = 0;  // permission bits
  int64_t modified_unix_ms = 0;
  std::string symlink_target;  // for 'l'
  uid_t uid = 0;  // the owner, as the host sees it
  gid_t gid = 0;
  std::string owner, group;  // their names in the sandbox, set by whoever knows them
  FileMetadata metadata;
};
// The most a listing may hold (ListWorkspace's max_bytes): gRPC's default
// limit on a message a client receives, so any client can take any listing.
inline constexpr size_t kMaxListingBytes = 4 << 20;
// Lists `dir` recursively (symlinks listed, never followed), at most
// `max_entries` entries and `max_depth` levels below `dir` (0: all, up to
// 64), depth first, each directory's entries by name: an entry, then what
// it holds, then its next sibling. A listing whose entries (their paths,
// link targets and metadata, and a fixed cost each) pass `max_bytes` is
// RESOURCE_EXHAUSTED, saying to list less: it is never built whole.
absl::StatusOr<std::vector<WorkspaceListing>> ListWorkspace(int root_fd, const std::string& dir,
                                                            size_t max_entries = 10'000,
                                                            int max_depth = 0,
                                                            Resolve resolve = Resolve::kBeneath,
                                                            size_t max_bytes = kMaxListingBytes);

// The entry `path` names ("" for the root), a symlink itself rather than
// what it points to. Use these under ScopedFsIds, like the file functions.
absl::StatusOr<WorkspaceListing> StatWorkspacePath(int root_fd, const std::string& path,
                                                   Resolve resolve = Resolve::kBeneath);
// Creates directory `path` and its missing parents; ALREADY_EXISTS if it is there.
absl::StatusOr<WorkspaceListing> MakeWorkspaceDirectory(int root_fd, const std::string& path,
                                                        Resolve resolve = Resolve::kBeneath);
// rename(2) of `from` to `to` beneath the root (missing parents of `to` created).
absl::StatusOr<WorkspaceListing> MoveWorkspacePath(int root_fd, const std::string& from,
                                                   const std::string& to,
                                                   Resolve resolve = Resolve::kBeneath);
// Removes `path`: a file, a symlink itself, or a directory and all it holds
// (never crossing into another mount). The root itself is refused.
absl::Status RemoveWorkspacePath(int root_fd, const std::string& path,
                                 Resolve resolve = Resolve::kBeneath);

}  // namespace warden
