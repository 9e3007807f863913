#include "kernel/shared_workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace warden {

std::string SharedWorkspace::DefaultParent() {
  return (std::filesystem::temp_directory_path() / absl::StrCat("warden-workspaces-", getuid()))
      .string();
}

absl::StatusOr<std::unique_ptr<SharedWorkspace>> SharedWorkspace::Create(Executor& executor,
                                                                         const std::string& parent,
                                                                         int64_t max_bytes) {
  // The parent is ours alone: others may pass through to a workspace they
  // were given (the sandboxes' host ids), never list or create in it.
  if (mkdir(parent.c_str(), 0711) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", parent));
  }
  struct stat st;
  if (lstat(parent.c_str(), &st) != 0) return absl::ErrnoToStatus(errno, "stat " + parent);
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        parent, " must be a directory that only wardend's user owns and can write; remove it "
                "and let wardend create it"));
  }
  auto ws = std::unique_ptr<SharedWorkspace>(new SharedWorkspace());
  ws->slot_ = executor.ReserveIdentity();
  const auto [uid, gid] = executor.ProgramHostIds(ws->slot_);
  std::random_device random;
  ws->path_ = absl::StrFormat("%s/%08x%08x", parent, random(), random());
  if (mkdir(ws->path_.c_str(), 0700) != 0) return absl::ErrnoToStatus(errno, "mkdir " + ws->path_);
  const std::string data = absl::StrCat("size=", max_bytes, ",mode=0755,uid=", uid, ",gid=", gid);
  if (mount("warden-workspace", ws->path_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) == 0) {
    ws->mounted_ = true;
  } else if (errno != EPERM) {
    const int e = errno;
    rmdir(ws->path_.c_str());
    return absl::ErrnoToStatus(e, "mount a tmpfs at " + ws->path_);
  }
  if (!ws->mounted_ && chown(ws->path_.c_str(), uid, gid) != 0 && geteuid() == 0) {
    return absl::ErrnoToStatus(errno, "chown " + ws->path_);
  }
  if (!ws->mounted_ && chmod(ws->path_.c_str(), 0755) != 0) {
    return absl::ErrnoToStatus(errno, "chmod " + ws->path_);
  }
  return ws;
}

SharedWorkspace::~SharedWorkspace() {
  if (path_.empty()) return;
  if (mounted_) {
    // Lazily: a sandbox still dying may hold it for a moment.
    umount2(path_.c_str(), MNT_DETACH);
  } else {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  rmdir(path_.c_str());
}

absl::StatusOr<SharedWorkspace::DiskUsage> SharedWorkspace::Disk() const {
  if (!mounted_) return absl::NotFoundError("the workspace is a plain directory, without a size of its own");
  struct statvfs st;
  if (statvfs(path_.c_str(), &st) != 0) return absl::ErrnoToStatus(errno, "statvfs the workspace");
  DiskUsage usage;
  usage.limit_bytes = static_cast<int64_t>(st.f_blocks) * st.f_frsize;
  usage.used_bytes = static_cast<int64_t>(st.f_blocks - st.f_bfree) * st.f_frsize;
  return usage;
}

}  // namespace warden
