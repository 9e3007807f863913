#include "kernel/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace warden {
namespace {

constexpr uint64_t kResolve =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

absl::Status PathError(int err, const std::string& path, absl::string_view verb) {
  if (err == ELOOP || err == EXDEV) {
    return absl::PermissionDeniedError(absl::StrCat(
        "refusing to ", verb, " '", path, "': it goes through a symlink or out of the workspace"));
  }
  if (err == ENOENT) return absl::NotFoundError(absl::StrCat("'", path, "' does not exist in the workspace"));
  return absl::ErrnoToStatus(err, absl::StrCat(verb, " '", path, "'"));
}

}  // namespace

ScopedFsIds::ScopedFsIds(uid_t uid, gid_t gid) {
  // Raw syscalls: each returns the previous id. Group first, while we may.
  old_gid_ = static_cast<gid_t>(syscall(SYS_setfsgid, gid));
  old_uid_ = static_cast<uid_t>(syscall(SYS_setfsuid, uid));
}

ScopedFsIds::~ScopedFsIds() {
  syscall(SYS_setfsuid, old_uid_);
  syscall(SYS_setfsgid, old_gid_);
}

absl::Status ValidateWorkspacePath(const std::string& path, bool allow_root) {
  if (path.empty()) {
    if (allow_root) return absl::OkStatus();
    return absl::InvalidArgumentError("the file path is empty");
  }
  if (path.size() > 4096) return absl::InvalidArgumentError("the file path is longer than 4096 bytes");
  if (path[0] == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is absolute: give a path relative to the workspace, e.g. data/in.csv"));
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' must be a plain relative path: no '..', '.' or empty components"));
    }
    if (part.find('\0') != absl::string_view::npos) {
      return absl::InvalidArgumentError("the file path contains a NUL byte");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> OpenBeneath(int root_fd, const std::string& path, int flags, mode_t mode) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = kResolve;
  const char* p = path.empty() ? "." : path.c_str();
  int fd;
  do {
    fd = static_cast<int>(syscall(SYS_openat2, root_fd, p, &how, sizeof(how)));
  } while (fd < 0 && errno == EAGAIN);  // RESOLVE_* may ask to retry on a racing rename
  if (fd < 0) return PathError(errno, path, "open");
  return UniqueFd(fd);
}

absl::Status WriteWorkspaceFile(int root_fd, const std::string& path, const std::string& data,
                                int64_t max_bytes) {
  if (auto s = ValidateWorkspacePath(path); !s.ok()) return s;
  if (static_cast<int64_t>(data.size()) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the file is ", data.size(),
                                                   " bytes; the cap is ", max_bytes));
  }
  // Parents, one component at a time, each beneath the last.
  std::vector<std::string> parts = absl::StrSplit(path, '/');
  std::string parent_path, prefix;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    parent_path = prefix;
    prefix = prefix.empty() ? parts[i] : absl::StrCat(prefix, "/", parts[i]);
    auto parent = OpenBeneath(root_fd, parent_path, O_PATH | O_DIRECTORY);
    if (!parent.ok()) return parent.status();
    if (mkdirat(parent->get(), parts[i].c_str(), 0755) != 0 && errno != EEXIST) {
      return PathError(errno, prefix, "create directory");
    }
  }
  auto fd = OpenBeneath(root_fd, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a regular file"));
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd->get(), data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOSPC) {
        return absl::ResourceExhaustedError(
            absl::StrCat("the workspace is full writing '", path, "'"));
      }
      return absl::ErrnoToStatus(errno, absl::StrCat("write '", path, "'"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWorkspaceFile(int root_fd, const std::string& path,
                                              int64_t max_bytes) {
  if (auto s = ValidateWorkspacePath(path); !s.ok()) return s;
  auto fd = OpenBeneath(root_fd, path, O_RDONLY | O_NONBLOCK);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a regular file"));
  }
  if (st.st_size > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("'", path, "' is ", st.st_size, " bytes; the cap is ", max_bytes));
  }
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd->get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("read '", path, "'"));
    if (n == 0) break;
    if (static_cast<int64_t>(data.size()) + n > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("'", path, "' grew past the cap"));
    }
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

absl::StatusOr<std::vector<WorkspaceListing>> ListWorkspace(int root_fd, const std::string& dir,
                                                            size_t max_entries) {
  if (auto s = ValidateWorkspacePath(dir, /*allow_root=*/true); !s.ok()) return s;
  std::vector<WorkspaceListing> out;
  std::function<absl::Status(const std::string&, int)> walk = [&](const std::string& rel,
                                                                   int depth) -> absl::Status {
    if (depth > 64) return absl::OkStatus();
    auto fd = OpenBeneath(root_fd, rel, O_RDONLY | O_DIRECTORY);
    if (!fd.ok()) return fd.status();
    DIR* d = fdopendir(fd->Release());
    if (d == nullptr) return absl::ErrnoToStatus(errno, "fdopendir");
    std::vector<std::string> subdirs;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (out.size() >= max_entries) break;
      struct stat st;
      if (fstatat(dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      const std::string child = rel.empty() ? name : absl::StrCat(rel, "/", name);
      char type = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : 'o';
      out.push_back({child, type, type == 'f' ? static_cast<int64_t>(st.st_size) : 0});
      if (type == 'd') subdirs.push_back(child);
    }
    closedir(d);
    for (const std::string& sub : subdirs) {
      if (auto s = walk(sub, depth + 1); !s.ok() && !absl::IsNotFound(s)) return s;
    }
    return absl::OkStatus();
  };
  if (auto s = walk(dir, 0); !s.ok()) return s;
  return out;
}

}  // namespace warden
