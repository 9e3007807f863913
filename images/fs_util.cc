#include "images/fs_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <string.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace warden::images {

int OpenAt2(int dir, const char* path, int flags, mode_t mode, Resolve resolve) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = resolve == Resolve::kBeneath
                    ? RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV
                    : RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  int fd;
  do {
    fd = static_cast<int>(syscall(SYS_openat2, dir, path, &how, sizeof(how)));
  } while (fd < 0 && errno == EAGAIN);
  return fd;
}

absl::StatusOr<UniqueFd> Open(int dir, const std::string& path, int flags, Resolve resolve, mode_t mode) {
  UniqueFd fd(OpenAt2(dir, path.c_str(), flags, mode, resolve));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  return fd;
}

namespace {

absl::StatusOr<std::string> ReadAll(int fd, const std::string& name, int64_t max_bytes) {
  struct stat st;
  if (fstat(fd, &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("stat ", name));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(name, " is not a regular file"));
  if (st.st_size > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " holds ", st.st_size, " bytes; at most ", max_bytes, " are read"));
  }
  std::string data;
  data.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("read ", name));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return data;
}

}  // namespace

absl::StatusOr<std::string> ReadFileAt(int dir, const std::string& path, int64_t max_bytes) {
  ASSIGN_OR_RETURN(UniqueFd fd, Open(dir, path, O_RDONLY));
  return ReadAll(fd.get(), path, max_bytes);
}

absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  return ReadAll(fd.get(), path, max_bytes);
}

std::string RandomName(absl::string_view prefix) {
  unsigned char bytes[8] = {};
  if (getrandom(bytes, sizeof(bytes), 0) != sizeof(bytes)) {
    // Never expected; the pid and a counter still make it unique here.
    static int counter = 0;
    return absl::StrCat(prefix, getpid(), "-", ++counter);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string name(prefix);
  for (unsigned char b : bytes) {
    name += kHex[b >> 4];
    name += kHex[b & 15];
  }
  return name;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view data, mode_t mode) {
  const std::string tmp = absl::StrCat(path, ".", RandomName("tmp-"));
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("create ", tmp));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      unlink(tmp.c_str());
      return absl::ErrnoToStatus(e, absl::StrCat("write ", tmp));
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd.get()) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(e, absl::StrCat("write ", path));
  }
  return absl::OkStatus();
}

absl::Status RemoveTreeAt(int dir, const char* name) {
  if (unlinkat(dir, name, 0) == 0 || errno == ENOENT) return absl::OkStatus();
  if (errno != EISDIR && errno != EPERM) return absl::ErrnoToStatus(errno, absl::StrCat("unlink ", name));
  UniqueFd sub(openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sub) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", name));
  }
  // Read every name first: removing while reading may skip entries.
  for (;;) {
    std::vector<std::string> names;
    {
      UniqueFd scan(fcntl(sub.get(), F_DUPFD_CLOEXEC, 3));
      DIR* d = fdopendir(scan.Release());
      if (d == nullptr) return absl::ErrnoToStatus(errno, "fdopendir");
      rewinddir(d);
      while (struct dirent* e = readdir(d)) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        names.emplace_back(e->d_name);
        if (names.size() >= 4096) break;
      }
      closedir(d);
    }
    if (names.empty()) break;
    for (const std::string& child : names) RETURN_IF_ERROR(RemoveTreeAt(sub.get(), child.c_str()));
  }
  if (unlinkat(dir, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("rmdir ", name));
  }
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash + 1 == path.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot remove '", path, "'"));
  }
  const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  UniqueFd dir(open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return errno == ENOENT ? absl::OkStatus() : absl::ErrnoToStatus(errno, absl::StrCat("open ", parent));
  return RemoveTreeAt(dir.get(), path.c_str() + slash + 1);
}

absl::Status MakeDirectories(const std::string& path, mode_t mode) {
  if (path.empty() || path[0] != '/') return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not absolute"));
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    const std::string prefix = path.substr(0, next);
    if (mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", prefix));
    }
    pos = next + 1;
  }
  return absl::OkStatus();
}

namespace {

absl::Status Measure(int dir, TreeUsage* usage, int depth) {
  if (depth > 512) return absl::InvalidArgumentError("the tree is deeper than 512 levels");
  UniqueFd scan(fcntl(dir, F_DUPFD_CLOEXEC, 3));
  DIR* d = fdopendir(scan.Release());
  if (d == nullptr) return absl::ErrnoToStatus(errno, "fdopendir");
  absl::Status status;
  while (struct dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    struct stat st;
    if (fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    usage->bytes += static_cast<int64_t>(st.st_blocks) * 512;
    usage->files += 1;
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(openat(dir, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub) status.Update(Measure(sub.get(), usage, depth + 1));
    }
  }
  closedir(d);
  return status;
}

}  // namespace

absl::StatusOr<TreeUsage> MeasureTree(const std::string& path) {
  UniqueFd dir(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  TreeUsage usage;
  RETURN_IF_ERROR(Measure(dir.get(), &usage, 0));
  return usage;
}

absl::Status RunProgram(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  UniqueFd out_r(pipe_fds[0]), out_w(pipe_fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char* env[] = {const_cast<char*>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), const_cast<char*>("LANG=C"), nullptr};
  pid_t pid;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), env);
  posix_spawn_file_actions_destroy(&actions);
  out_w.Reset();
  if (rc != 0) return absl::ErrnoToStatus(rc, absl::StrCat("run ", argv[0]));
  std::string output;
  char buf[4096];
  for (;;) {
    ssize_t n = read(out_r.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (output.size() < 4096) output.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(argv[0], " failed: ", absl::StripAsciiWhitespace(output)));
  }
  return absl::OkStatus();
}

}  // namespace warden::images
