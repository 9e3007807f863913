#include "kernel/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <functional>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace warden {
namespace {

constexpr uint64_t kResolveBeneath =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
constexpr uint64_t kResolveInRoot = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
constexpr char kMetadataPrefix[] = "user.e2b.";

// The path of entry `name` in the directory `dir_fd`, through our own
// /proc/self/fd: for the *xattr calls, which take no directory fd. `name`
// is one component, and the l* calls never follow it.
std::string EntryPath(int dir_fd, const std::string& name) {
  return absl::StrCat("/proc/self/fd/", dir_fd, "/", name);
}

bool ValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and what lies past U+10FFFF.
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n;
  }
  return true;
}

// The entry's user.e2b.* extended attributes (none on a filesystem without
// them, or for a symlink), in the order the filesystem lists them, as far
// as kMaxFileMetadataBytes reaches: an entry that does not fit in what is
// left, or is not UTF-8 (a protobuf string must be, as envd skips such
// entries too), is left out. A sandbox can set far more (hundreds of 64 KiB
// values on a tmpfs): none of it is read past the bound.
FileMetadata ReadMetadata(int dir_fd, const std::string& name) {
  FileMetadata out;
  const std::string path = EntryPath(dir_fd, name);
  // XATTR_LIST_MAX: the most any file's list of names can be.
  static constexpr size_t kListMax = 65536;
  auto names = std::make_unique<char[]>(kListMax);
  const ssize_t n = llistxattr(path.c_str(), names.get(), kListMax);
  size_t used = 0;
  char value[kMaxFileMetadataBytes];
  for (ssize_t i = 0; n > 0 && i < n;) {
    const std::string key(names.get() + i);
    i += static_cast<ssize_t>(key.size()) + 1;
    if (!absl::StartsWith(key, kMetadataPrefix)) continue;
    if (used + key.size() >= kMaxFileMetadataBytes) continue;
    // Never more than what is left: a larger value is ERANGE, not read.
    const ssize_t v = lgetxattr(path.c_str(), key.c_str(), value, kMaxFileMetadataBytes - used - key.size());
    if (v < 0) continue;
    const absl::string_view text(value, static_cast<size_t>(v));
    const std::string short_key = key.substr(sizeof(kMetadataPrefix) - 1);
    if (!ValidUtf8(short_key) || !ValidUtf8(text)) continue;
    used += key.size() + text.size();
    out[short_key] = std::string(text);
  }
  return out;
}

// What one entry adds to a listing's message: its strings and a bound on
// the rest (numbers, owner and group names, field tags).
size_t ListingBytes(const WorkspaceListing& e) {
  size_t n = 64 + e.path.size() + e.symlink_target.size() + e.owner.size() + e.group.size();
  for (const auto& [key, value] : e.metadata) n += key.size() + value.size() + 8;
  return n;
}

absl::Status ReplaceMetadata(int fd, const std::string& path, const FileMetadata& metadata) {
  char names[4096];
  const ssize_t n = flistxattr(fd, names, sizeof(names));
  for (ssize_t i = 0; n > 0 && i < n;) {
    const std::string key(names + i);
    i += static_cast<ssize_t>(key.size()) + 1;
    if (absl::StartsWith(key, kMetadataPrefix)) fremovexattr(fd, key.c_str());
  }
  for (const auto& [key, value] : metadata) {
    const std::string name = absl::StrCat(kMetadataPrefix, key);
    if (fsetxattr(fd, name.c_str(), value.data(), value.size(), 0) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("keeping metadata '", key, "' with '", path,
                                                     "' (its filesystem may not take extended attributes)"));
    }
  }
  return absl::OkStatus();
}

absl::Status PathError(int err, const std::string& path, absl::string_view verb) {
  if (err == ELOOP || err == EXDEV) {
    return absl::PermissionDeniedError(absl::StrCat(
        "refusing to ", verb, " '", path, "': it goes through a symlink or out of the workspace"));
  }
  if (err == ENOENT) return absl::NotFoundError(absl::StrCat("'", path, "' does not exist in the workspace"));
  return absl::ErrnoToStatus(err, absl::StrCat(verb, " '", path, "'"));
}

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<std::string, std::string> SplitParent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

int64_t UnixMillis(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000 + t.tv_nsec / 1'000'000;
}

char TypeOf(mode_t mode) {
  return S_ISREG(mode) ? 'f' : S_ISDIR(mode) ? 'd' : S_ISLNK(mode) ? 'l' : 'o';
}

WorkspaceListing ListingOf(const std::string& path, const struct stat& st) {
  const char type = TypeOf(st.st_mode);
  WorkspaceListing out;
  out.path = path;
  out.type = type;
  out.size = type == 'f' || type == 'd' ? static_cast<int64_t>(st.st_size) : 0;
  out.mode = static_cast<uint32_t>(st.st_mode & 07777);
  out.modified_unix_ms = UnixMillis(st.st_mtim);
  out.uid = st.st_uid;
  out.gid = st.st_gid;
  return out;
}

// The listing of entry `name` of directory `dir_fd` (opened without
// following it), with its link target and metadata; `path` names it.
std::optional<WorkspaceListing> Describe(int dir_fd, const std::string& name, const std::string& path) {
  struct stat st;
  if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  WorkspaceListing out = ListingOf(path, st);
  if (out.type == 'l') {
    char target[4096];
    ssize_t n = readlinkat(dir_fd, name.c_str(), target, sizeof(target));
    if (n > 0) out.symlink_target.assign(target, static_cast<size_t>(n));
  } else if (out.type == 'f' || out.type == 'd') {
    out.metadata = ReadMetadata(dir_fd, name);
  }
  return out;
}

// Creates the missing parents of `path`, one component at a time, each
// beneath the last.
absl::Status MakeParents(int root_fd, const std::string& path, Resolve resolve) {
  std::vector<std::string> parts = absl::StrSplit(path, '/');
  std::string parent_path, prefix;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    parent_path = prefix;
    prefix = prefix.empty() ? parts[i] : absl::StrCat(prefix, "/", parts[i]);
    auto parent = OpenBeneath(root_fd, parent_path, O_PATH | O_DIRECTORY, 0, resolve);
    if (!parent.ok()) return parent.status();
    if (mkdirat(parent->get(), parts[i].c_str(), 0755) != 0 && errno != EEXIST) {
      return PathError(errno, prefix, "create directory");
    }
  }
  return absl::OkStatus();
}

// Empties directory `name` in `parent` and removes it. Every step is
// relative to a directory fd opened without following symlinks, so entries
// swapped for symlinks by the sandbox's code while this runs lead nowhere;
// a directory on another device (a mount) is left alone.
absl::Status RemoveTree(int parent, const std::string& name, dev_t device, int depth) {
  if (depth > 64) return absl::FailedPreconditionError("the directory tree is deeper than 64 levels");
  int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open '", name, "'"));
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_dev != device) {
    close(fd);
    return absl::PermissionDeniedError(absl::StrCat("refusing to remove '", name, "': it is another mount"));
  }
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    return absl::ErrnoToStatus(errno, "fdopendir");
  }
  absl::Status status;
  std::vector<std::string> subdirs;
  while (dirent* e = readdir(d)) {
    const std::string child = e->d_name;
    if (child == "." || child == "..") continue;
    if (unlinkat(dirfd(d), child.c_str(), 0) == 0) continue;
    if (errno == EISDIR) {
      subdirs.push_back(child);
    } else if (errno != ENOENT) {
      status = absl::ErrnoToStatus(errno, absl::StrCat("remove '", child, "'"));
      break;
    }
  }
  for (size_t i = 0; status.ok() && i < subdirs.size(); ++i) {
    status = RemoveTree(dirfd(d), subdirs[i], device, depth + 1);
  }
  closedir(d);
  if (!status.ok()) return status;
  if (unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("remove directory '", name, "'"));
  }
  return absl::OkStatus();
}

// Copies the regular file `from_name` of directory `from_dir` to `to_name`
// of `to_dir` (created, or replaced), its mode and user.e2b.* metadata with
// it. Neither name is followed if it is a symlink.
absl::Status CopyFile(int from_dir, const std::string& from_name, int to_dir, const std::string& to_name,
                      const std::string& to) {
  UniqueFd in(openat(from_dir, from_name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!in) return PathError(errno, from_name, "read");
  struct stat st;
  if (fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("'", from_name, "' is not a regular file"));
  }
  UniqueFd out(openat(to_dir, to_name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                      st.st_mode & 07777));
  if (!out) return PathError(errno, to, "create");
  char buf[65536];
  for (;;) {
    const ssize_t n = read(in.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("copy to '", to, "'"));
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = write(out.get(), buf + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == ENOSPC) return absl::ResourceExhaustedError(absl::StrCat("no room for '", to, "'"));
      if (w <= 0) return absl::ErrnoToStatus(w < 0 ? errno : EIO, absl::StrCat("copy to '", to, "'"));
      done += w;
    }
  }
  FileMetadata metadata = ReadMetadata(from_dir, from_name);
  return ReplaceMetadata(out.get(), to, metadata);
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

absl::StatusOr<UniqueFd> OpenBeneath(int root_fd, const std::string& path, int flags, mode_t mode,
                                     Resolve resolve) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC | (resolve == Resolve::kBeneath ? O_NOFOLLOW : 0));
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = resolve == Resolve::kBeneath ? kResolveBeneath : kResolveInRoot;
  const char* p = path.empty() ? "." : path.c_str();
  int fd;
  do {
    fd = static_cast<int>(syscall(SYS_openat2, root_fd, p, &how, sizeof(how)));
  } while (fd < 0 && errno == EAGAIN);  // RESOLVE_* may ask to retry on a racing rename
  if (fd < 0) return PathError(errno, path, "open");
  return UniqueFd(fd);
}

absl::Status ValidateFileMetadata(const FileMetadata& metadata) {
  constexpr size_t kMaxKey = 255 - (sizeof(kMetadataPrefix) - 1);  // the VFS's bound on a name
  size_t total = 0;
  for (const auto& [key, value] : metadata) {
    if (key.empty() || key.size() > kMaxKey || key.find_first_of(std::string("/\0", 2)) != std::string::npos ||
        !ValidUtf8(key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata key '", key, "' must be 1-", kMaxKey, " bytes of UTF-8 without '/' or NUL"));
    }
    if (!ValidUtf8(value)) {
      return absl::InvalidArgumentError(absl::StrCat("metadata '", key, "' is not UTF-8 text"));
    }
    total += sizeof(kMetadataPrefix) - 1 + key.size() + value.size();
  }
  if (total > kMaxFileMetadataBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the file's metadata is ", total, " bytes (keys with their 'user.e2b.' prefix, and values); at most ",
        kMaxFileMetadataBytes, " are kept with a file, as in E2B: give fewer or shorter entries"));
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> OpenWorkspaceFileToWrite(int root_fd, const std::string& path, Resolve resolve,
                                                  const FileMetadata& metadata) {
  if (auto s = ValidateWorkspacePath(path); !s.ok()) return s;
  if (auto s = ValidateFileMetadata(metadata); !s.ok()) return s;
  if (auto s = MakeParents(root_fd, path, resolve); !s.ok()) return s;
  // Opened without O_TRUNC first: a FIFO or device in its place is refused
  // before anything is written to it.
  auto fd = OpenBeneath(root_fd, path, O_WRONLY | O_CREAT | O_NONBLOCK, 0644, resolve);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a regular file"));
  }
  if (ftruncate(fd->get(), 0) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("truncate '", path, "'"));
  if (auto s = ReplaceMetadata(fd->get(), path, metadata); !s.ok()) return s;
  return fd;
}

absl::Status WriteToWorkspaceFile(int fd, absl::string_view data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
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

absl::Status WriteWorkspaceFile(int root_fd, const std::string& path, const std::string& data,
                                int64_t max_bytes, Resolve resolve, const FileMetadata& metadata) {
  if (auto s = ValidateWorkspacePath(path); !s.ok()) return s;
  if (static_cast<int64_t>(data.size()) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the file is ", data.size(),
                                                   " bytes; the cap is ", max_bytes));
  }
  auto fd = OpenWorkspaceFileToWrite(root_fd, path, resolve, metadata);
  if (!fd.ok()) return fd.status();
  if (auto s = WriteToWorkspaceFile(fd->get(), data, path); !s.ok()) return s;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWorkspaceFile(int root_fd, const std::string& path,
                                              int64_t max_bytes, Resolve resolve) {
  if (auto s = ValidateWorkspacePath(path); !s.ok()) return s;
  // O_PATH first: nothing is opened for reading (a FIFO, a device, a
  // terminal) until it is known to be a regular file.
  auto where = OpenBeneath(root_fd, path, O_PATH, 0, resolve);
  if (!where.ok()) return where.status();
  struct stat st;
  // (O_PATH | O_NOFOLLOW opens a symlink itself: it is not followed.)
  if (fstat(where->get(), &st) == 0 && S_ISLNK(st.st_mode)) return PathError(ELOOP, path, "read");
  if (fstat(where->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a regular file"));
  }
  UniqueFd opened(open(absl::StrCat("/proc/self/fd/", where->get()).c_str(), O_RDONLY | O_CLOEXEC));
  if (!opened) return PathError(errno, path, "open");
  absl::StatusOr<UniqueFd> fd = std::move(opened);
  if (st.st_size > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("'", path, "' is ", st.st_size, " bytes; the cap is ", max_bytes));
  }
  // Sized once: growing by doubling copied a 10 MiB file several times over
  // into fresh pages, each a page fault here (docs/benchmarks.md).
  std::string data;
  data.reserve(static_cast<size_t>(st.st_size));
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
                                                            size_t max_entries, int max_depth,
                                                            Resolve resolve, size_t max_bytes) {
  if (auto s = ValidateWorkspacePath(dir, /*allow_root=*/true); !s.ok()) return s;
  std::vector<WorkspaceListing> out;
  size_t bytes = 0;
  std::function<absl::Status(const std::string&, int)> walk = [&](const std::string& rel,
                                                                   int depth) -> absl::Status {
    if (depth > 64 || (max_depth > 0 && depth >= max_depth)) return absl::OkStatus();
    auto fd = OpenBeneath(root_fd, rel, O_RDONLY | O_DIRECTORY, 0, resolve);
    if (!fd.ok()) return fd.status();
    DIR* d = fdopendir(fd->Release());
    if (d == nullptr) return absl::ErrnoToStatus(errno, "fdopendir");
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    std::vector<WorkspaceListing> here;
    for (const std::string& name : names) {
      if (out.size() + here.size() >= max_entries) break;
      const std::string child = rel.empty() ? name : absl::StrCat(rel, "/", name);
      if (auto entry = Describe(dirfd(d), name, child)) {
        bytes += ListingBytes(*entry);
        if (bytes > max_bytes) {
          closedir(d);
          return absl::ResourceExhaustedError(absl::StrCat(
              "the listing passed ", max_bytes >> 10, " KiB after ", out.size() + here.size(),
              " entries (their names, link targets and metadata), the most one answer may hold: "
              "list a directory further down, or fewer levels (depth)"));
        }
        here.push_back(std::move(*entry));
      }
    }
    closedir(d);
    for (WorkspaceListing& entry : here) {
      const bool is_dir = entry.type == 'd';
      const std::string child = entry.path;
      out.push_back(std::move(entry));
      if (!is_dir) continue;
      if (auto s = walk(child, depth + 1); !s.ok() && !absl::IsNotFound(s) && !absl::IsPermissionDenied(s)) {
        return s;
      }
    }
    return absl::OkStatus();
  };
  if (auto s = walk(dir, 0); !s.ok()) return s;
  return out;
}

absl::StatusOr<WorkspaceListing> StatWorkspacePath(int root_fd, const std::string& path, Resolve resolve) {
  if (auto s = ValidateWorkspacePath(path, /*allow_root=*/true); !s.ok()) return s;
  struct stat st;
  if (path.empty()) {
    if (fstat(root_fd, &st) != 0) return absl::ErrnoToStatus(errno, "stat the workspace");
    return ListingOf(path, st);
  }
  const auto [parent_path, name] = SplitParent(path);
  auto parent = OpenBeneath(root_fd, parent_path, O_PATH | O_DIRECTORY, 0, resolve);
  if (!parent.ok()) return parent.status();
  std::optional<WorkspaceListing> out = Describe(parent->get(), name, path);
  if (!out) return PathError(errno, path, "stat");
  return *std::move(out);
}

absl::StatusOr<WorkspaceListing> MakeWorkspaceDirectory(int root_fd, const std::string& path,
                                                        Resolve resolve) {
  if (auto s = ValidateWorkspacePath(path); !s.ok()) return s;
  if (auto s = MakeParents(root_fd, path, resolve); !s.ok()) return s;
  const auto [parent_path, name] = SplitParent(path);
  auto parent = OpenBeneath(root_fd, parent_path, O_PATH | O_DIRECTORY, 0, resolve);
  if (!parent.ok()) return parent.status();
  if (mkdirat(parent->get(), name.c_str(), 0755) != 0) {
    if (errno == EEXIST) return absl::AlreadyExistsError(absl::StrCat("'", path, "' already exists"));
    return PathError(errno, path, "create directory");
  }
  return StatWorkspacePath(root_fd, path, resolve);
}

absl::StatusOr<WorkspaceListing> MoveWorkspacePath(int root_fd, const std::string& from,
                                                   const std::string& to, Resolve resolve) {
  if (auto s = ValidateWorkspacePath(from); !s.ok()) return s;
  if (auto s = ValidateWorkspacePath(to); !s.ok()) return s;
  const auto [from_parent_path, from_name] = SplitParent(from);
  const auto [to_parent_path, to_name] = SplitParent(to);
  auto from_parent = OpenBeneath(root_fd, from_parent_path, O_PATH | O_DIRECTORY, 0, resolve);
  if (!from_parent.ok()) return from_parent.status();
  struct stat moved;
  if (fstatat(from_parent->get(), from_name.c_str(), &moved, AT_SYMLINK_NOFOLLOW) != 0) {
    return PathError(errno, from, "move");
  }
  if (auto s = MakeParents(root_fd, to, resolve); !s.ok()) return s;
  auto to_parent = OpenBeneath(root_fd, to_parent_path, O_PATH | O_DIRECTORY, 0, resolve);
  if (!to_parent.ok()) return to_parent.status();
  // renameat(2) acts on the last components themselves, never following them.
  if (renameat(from_parent->get(), from_name.c_str(), to_parent->get(), to_name.c_str()) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("'", from, "' does not exist in the workspace"));
    if (errno == EINVAL) {
      return absl::InvalidArgumentError(absl::StrCat("cannot move '", from, "' into itself ('", to, "')"));
    }
    if (errno == ENOTEMPTY || errno == EEXIST || errno == EISDIR || errno == ENOTDIR) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot move '", from, "' to '", to, "': ", strerror(errno), "; remove '", to, "' first"));
    }
    if (errno == EXDEV && resolve == Resolve::kInRoot && S_ISREG(moved.st_mode)) {
      // Between two of a machine's filesystems (/tmp and the workspace): a
      // file is copied, with its metadata, then removed, as mv does.
      if (auto s = CopyFile(from_parent->get(), from_name, to_parent->get(), to_name, to); !s.ok()) return s;
      if (unlinkat(from_parent->get(), from_name.c_str(), 0) != 0) return PathError(errno, from, "move");
      return StatWorkspacePath(root_fd, to, resolve);
    }
    if (errno == EXDEV && resolve == Resolve::kInRoot) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot move the directory '", from, "' to '", to, "': they are on two filesystems of the "
          "sandbox; copy it with a command (cp -a) instead"));
    }
    return PathError(errno, from, "move");
  }
  return StatWorkspacePath(root_fd, to, resolve);
}

absl::Status RemoveWorkspacePath(int root_fd, const std::string& path, Resolve resolve) {
  if (path.empty()) {
    return absl::InvalidArgumentError("refusing to remove the workspace itself: remove the files in it");
  }
  if (auto s = ValidateWorkspacePath(path); !s.ok()) return s;
  const auto [parent_path, name] = SplitParent(path);
  auto parent = OpenBeneath(root_fd, parent_path, O_PATH | O_DIRECTORY, 0, resolve);
  if (!parent.ok()) return parent.status();
  // unlinkat(2) never follows a symlink: a link is removed, not its target.
  if (unlinkat(parent->get(), name.c_str(), 0) == 0) return absl::OkStatus();
  if (errno != EISDIR) return PathError(errno, path, "remove");
  // The tree is removed within its own filesystem: a mount inside it
  // (which the workspace, for kBeneath, cannot hold) is left alone.
  struct stat top;
  if (fstatat(parent->get(), name.c_str(), &top, AT_SYMLINK_NOFOLLOW) != 0) {
    return PathError(errno, path, "remove");
  }
  // O_PATH fds cannot be read: the tree is walked from a readable parent.
  auto readable = OpenBeneath(root_fd, parent_path, O_RDONLY | O_DIRECTORY, 0, resolve);
  if (!readable.ok()) return readable.status();
  return RemoveTree(readable->get(), name, top.st_dev, 0);
}

}  // namespace warden
