// Small file system helpers for the image store: every path beneath a
// directory fd, resolved with openat2 so that nothing an image or a user
// planted (a symlink, a "..") reaches outside it.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sandbox/unique_fd.h"

namespace warden::images {

// openat2 resolution modes.
// kBeneath: beneath `dir`, no symlink anywhere, no "..", no other mount.
// kInRoot: `dir` is the root: symlinks are followed but resolve within it
// (as a chroot would), which is how a layer's own symlinks act when the
// layer is unpacked (Docker extracts inside a chroot).
enum class Resolve { kBeneath, kInRoot };

// openat2(dir, path, flags, mode) with the resolution above; retried on
// EAGAIN (a concurrent rename). -1 with errno on failure.
int OpenAt2(int dir, const char* path, int flags, mode_t mode, Resolve resolve);
absl::StatusOr<UniqueFd> Open(int dir, const std::string& path, int flags, Resolve resolve = Resolve::kBeneath,
                              mode_t mode = 0);

// The whole file `path` beneath `dir`, at most `max_bytes` (larger is an
// error naming the file and the limit).
absl::StatusOr<std::string> ReadFileAt(int dir, const std::string& path, int64_t max_bytes);
absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes);

// Writes `data` to `path` (absolute) through a temporary file and rename(2),
// so that readers see the old or the new content, never a part; fsync'd.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view data, mode_t mode = 0644);

// Removes `name` in `dir` and, for a directory, everything beneath it,
// without following any symlink. Missing is not an error.
absl::Status RemoveTreeAt(int dir, const char* name);
absl::Status RemoveTree(const std::string& path);

// mkdir -p of an absolute path, each new component `mode`.
absl::Status MakeDirectories(const std::string& path, mode_t mode = 0755);

// Bytes and inodes a tree holds (st_blocks * 512, st_nlink ignored: what
// the tree would take were it alone), without following symlinks.
struct TreeUsage {
  int64_t bytes = 0;
  int64_t files = 0;
};
absl::StatusOr<TreeUsage> MeasureTree(const std::string& path);

// A name for a temporary entry: `prefix` and 16 random hex digits.
std::string RandomName(absl::string_view prefix);

// Runs the program argv[0] (an absolute path) with PATH set to the host's
// system directories and LANG=C, and waits; its output (the first 4 KiB)
// is the error's text if it fails.
absl::Status RunProgram(const std::vector<std::string>& argv);

}  // namespace warden::images
