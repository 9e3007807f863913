#include "images/volume_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <spawn.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "images/fs_util.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace warden::images {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxRecordBytes = 64 << 10;

absl::Status CheckTenant(const std::string& tenant) {
  if (tenant.empty() || tenant.size() > 64 || tenant == "." || tenant == "..") {
    return absl::InvalidArgumentError("a tenant name is 1 to 64 characters of [A-Za-z0-9._-]");
  }
  for (char c : tenant) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError("a tenant name is 1 to 64 characters of [A-Za-z0-9._-]");
    }
  }
  return absl::OkStatus();
}

// The loop device already backed by the file `st` describes (another
// session, another wardend on this host), opened; or none.
UniqueFd ExistingLoop(const struct stat& st) {
  DIR* d = opendir("/sys/block");
  if (d == nullptr) return UniqueFd();
  UniqueFd found;
  while (struct dirent* e = readdir(d)) {
    if (!absl::StartsWith(e->d_name, "loop")) continue;
    UniqueFd dev(open(absl::StrCat("/dev/", e->d_name).c_str(), O_RDWR | O_CLOEXEC));
    if (!dev) continue;
    struct loop_info64 info = {};
    if (ioctl(dev.get(), LOOP_GET_STATUS64, &info) != 0) continue;
    if (info.lo_inode == st.st_ino && info.lo_device == st.st_dev) {
      found = std::move(dev);
      break;
    }
  }
  closedir(d);
  return found;
}

// A new loop device over `image_fd`, cleared by the kernel once the last
// user of it (the file system mounted from it) is gone.
absl::StatusOr<UniqueFd> AttachLoop(int image_fd, const std::string& image_path) {
  UniqueFd control(open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control) {
    return absl::FailedPreconditionError(absl::StrCat(
        "volumes need loop devices (/dev/loop-control: ", strerror(errno), "): run wardend as root on a host with them"));
  }
  for (int attempt = 0; attempt < 16; ++attempt) {
    const int n = ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (n < 0) return absl::ErrnoToStatus(errno, "LOOP_CTL_GET_FREE");
    UniqueFd dev(open(absl::StrCat("/dev/loop", n).c_str(), O_RDWR | O_CLOEXEC));
    if (!dev) return absl::ErrnoToStatus(errno, absl::StrCat("open /dev/loop", n));
    struct loop_config config = {};
    config.fd = static_cast<uint32_t>(image_fd);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    strncpy(reinterpret_cast<char*>(config.info.lo_file_name), image_path.c_str(), LO_NAME_SIZE - 1);
    if (ioctl(dev.get(), LOOP_CONFIGURE, &config) == 0) return dev;
    if (errno != EBUSY) return absl::ErrnoToStatus(errno, "LOOP_CONFIGURE");
    // Another process took that device between the two calls: the next.
  }
  return absl::UnavailableError("no free loop device");
}

absl::StatusOr<UniqueFd> MountExt4(int loop_fd) {
  const std::string source = absl::StrCat("/proc/self/fd/", loop_fd);
  UniqueFd fs(fsopen("ext4", FSOPEN_CLOEXEC));
  if (!fs) return absl::ErrnoToStatus(errno, "fsopen ext4");
  if (fsconfig(fs.get(), FSCONFIG_SET_STRING, "source", source.c_str(), 0) != 0 ||
      fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the volume's file system cannot be mounted: ", strerror(errno),
        errno == EBUSY ? " (another host has it mounted: ext4's multi-mount protection)" : ""));
  }
  UniqueFd mount(fsmount(fs.get(), FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
  if (!mount) return absl::ErrnoToStatus(errno, "fsmount");
  return mount;
}

absl::Status Errno(int e, const std::string& what, const std::string& path) {
  if (e == ENOENT) return absl::NotFoundError(absl::StrCat("no '", path, "' in the volume"));
  if (e == ELOOP) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is a symlink or lies beneath one: volume paths are never resolved through one"));
  }
  if (e == ENOSPC || e == EDQUOT) return absl::ResourceExhaustedError("the volume is full (its quota of bytes or files)");
  if (e == EEXIST) return absl::AlreadyExistsError(absl::StrCat("'", path, "' exists in the volume"));
  if (e == ENOTDIR) return absl::FailedPreconditionError(absl::StrCat("a parent of '", path, "' is not a directory"));
  if (e == EISDIR) return absl::FailedPreconditionError(absl::StrCat("'", path, "' is a directory"));
  return absl::ErrnoToStatus(e, absl::StrCat(what, " ", path));
}

VolumeEntry EntryOf(const std::string& path, const struct stat& st, const std::string& target) {
  VolumeEntry e;
  e.path = path;
  e.name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  e.type = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : 'o';
  e.size = st.st_size;
  e.mode = st.st_mode & 07777;
  e.uid = st.st_uid;
  e.gid = st.st_gid;
  e.modified_unix_ms = st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1'000'000;
  e.accessed_unix_ms = st.st_atim.tv_sec * 1000 + st.st_atim.tv_nsec / 1'000'000;
  e.changed_unix_ms = st.st_ctim.tv_sec * 1000 + st.st_ctim.tv_nsec / 1'000'000;
  e.symlink_target = target;
  return e;
}

// The parent of `path` beneath `root` (never through a symlink), making
// missing ones with `attrs` when asked; `name` gets the last component.
absl::StatusOr<UniqueFd> ParentOf(int root, const std::string& path, bool make, const EntryAttributes& attrs,
                                  std::string* name) {
  std::vector<std::string> parts = absl::StrSplit(path, '/');
  *name = parts.back();
  parts.pop_back();
  UniqueFd dir(openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::string so_far;
  for (const std::string& part : parts) {
    so_far = so_far.empty() ? part : absl::StrCat(so_far, "/", part);
    UniqueFd next(OpenAt2(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY, 0, Resolve::kBeneath));
    if (!next && errno == ENOENT && make) {
      if (mkdirat(dir.get(), part.c_str(), attrs.mode.value_or(0755)) != 0 && errno != EEXIST) {
        return Errno(errno, "mkdir", so_far);
      }
      next.Reset(OpenAt2(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY, 0, Resolve::kBeneath));
      if (next) fchown(next.get(), attrs.uid.value_or(kVolumeOwner), attrs.gid.value_or(kVolumeOwner));
    }
    if (!next) return Errno(errno, "open", so_far);
    dir = std::move(next);
  }
  return dir;
}

absl::StatusOr<VolumeEntry> StatAt(int dir, const std::string& name, const std::string& path) {
  struct stat st;
  if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW | (name.empty() ? AT_EMPTY_PATH : 0)) != 0) {
    return Errno(errno, "stat", path);
  }
  std::string target;
  if (S_ISLNK(st.st_mode)) {
    char buf[4096];
    ssize_t n = readlinkat(dir, name.c_str(), buf, sizeof(buf));
    if (n > 0) target.assign(buf, static_cast<size_t>(n));
  }
  return EntryOf(path, st, target);
}

}  // namespace

absl::Status CheckVolumePath(const std::string& path) {
  if (path.size() > 4096) return absl::InvalidArgumentError("the path is longer than 4096 bytes");
  if (path.empty()) return absl::OkStatus();
  if (path[0] == '/') return absl::InvalidArgumentError(absl::StrCat("'", path, "' must be relative to the volume's root"));
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "' must be normalised: no empty, '.' or '..' component"));
    }
    if (part.find('\0') != absl::string_view::npos) return absl::InvalidArgumentError("the path holds a NUL");
  }
  return absl::OkStatus();
}

absl::Status VolumeStore::CheckName(const std::string& name) {
  if (name.empty() || name.size() > 63 || !absl::ascii_isalnum(name[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume name '", name, "' must be 1 to 63 characters of [A-Za-z0-9._-], first a letter or digit"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat("volume name '", name, "' has characters outside [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

std::string VolumeInfo::ToJson() const {
  return Json{{"version", 1},
              {"name", name},
              {"tenant", tenant},
              {"max_bytes", max_bytes},
              {"max_files", max_files},
              {"created_unix_ms", created_unix_ms},
              {"base_bytes", base_bytes},
              {"base_files", base_files}}
      .dump();
}

absl::StatusOr<VolumeInfo> VolumeInfo::FromJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("a volume's record is not JSON");
  VolumeInfo v;
  v.name = j.value("name", "");
  v.tenant = j.value("tenant", "");
  v.max_bytes = j.value("max_bytes", int64_t{0});
  v.max_files = j.value("max_files", int64_t{0});
  v.created_unix_ms = j.value("created_unix_ms", int64_t{0});
  v.base_bytes = j.value("base_bytes", int64_t{0});
  v.base_files = j.value("base_files", int64_t{0});
  return v;
}

absl::StatusOr<std::unique_ptr<VolumeStore>> VolumeStore::Open(const Options& options) {
  if (options.dir.empty() || options.dir[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("the volume store's directory '", options.dir, "' is not absolute"));
  }
  RETURN_IF_ERROR(MakeDirectories(options.dir + "/tenants", 0700));
  chmod(options.dir.c_str(), 0700);
  return std::unique_ptr<VolumeStore>(new VolumeStore(options));
}

std::string VolumeStore::RecordPath(const std::string& tenant, const std::string& name) const {
  return absl::StrCat(options_.dir, "/tenants/", tenant, "/", name, ".json");
}

std::string VolumeStore::ImagePath(const std::string& tenant, const std::string& name) const {
  return absl::StrCat(options_.dir, "/tenants/", tenant, "/", name, ".img");
}

absl::StatusOr<VolumeInfo> VolumeStore::Get(const std::string& tenant, const std::string& name) const {
  RETURN_IF_ERROR(CheckTenant(tenant));
  RETURN_IF_ERROR(CheckName(name));
  auto text = ReadFile(RecordPath(tenant, name), kMaxRecordBytes);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) return absl::NotFoundError(absl::StrCat("there is no volume '", name, "'"));
    return text.status();
  }
  return VolumeInfo::FromJson(*text);
}

std::vector<VolumeInfo> VolumeStore::List(const std::string& tenant) const {
  std::vector<VolumeInfo> out;
  if (!CheckTenant(tenant).ok()) return out;
  DIR* d = opendir(absl::StrCat(options_.dir, "/tenants/", tenant).c_str());
  if (d == nullptr) return out;
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    const std::string file = e->d_name;
    if (absl::EndsWith(file, ".json")) names.push_back(file.substr(0, file.size() - 5));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    auto info = Get(tenant, name);
    if (info.ok()) out.push_back(*std::move(info));
  }
  return out;
}

absl::StatusOr<VolumeInfo> VolumeStore::Create(const std::string& tenant, const std::string& name, int64_t max_bytes,
                                               int64_t max_files, const Ceilings& ceilings) {
  RETURN_IF_ERROR(CheckTenant(tenant));
  RETURN_IF_ERROR(CheckName(name));
  if (max_bytes < (16 << 20)) return absl::InvalidArgumentError("a volume holds at least 16 MiB");
  if (max_files < 16) return absl::InvalidArgumentError("a volume holds at least 16 files");
  absl::MutexLock lock(&mu_);
  const std::vector<VolumeInfo> existing = List(tenant);
  int64_t reserved = 0;
  for (const VolumeInfo& v : existing) {
    if (v.name == name) return absl::AlreadyExistsError(absl::StrCat("volume '", name, "' exists"));
    reserved += v.max_bytes;
  }
  if (ceilings.max_count > 0 && static_cast<int>(existing.size()) >= ceilings.max_count) {
    return absl::ResourceExhaustedError(absl::StrCat("the tenant has ", existing.size(),
                                                     " volumes, its quota: delete one first"));
  }
  if (ceilings.max_bytes > 0 && reserved + max_bytes > ceilings.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the tenant's volumes may hold ", ceilings.max_bytes >> 20, " MiB together; ", reserved >> 20,
        " MiB are given to its volumes already: ask for at most ", (ceilings.max_bytes - reserved) >> 20, " MiB"));
  }
  RETURN_IF_ERROR(MakeDirectories(absl::StrCat(options_.dir, "/tenants/", tenant), 0700));
  const std::string image = ImagePath(tenant, name);
  {
    UniqueFd fd(open(image.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("create ", image));
    // The quota, plus what ext4 keeps for itself (inode tables, a 4 MiB
    // journal), so that `df` inside shows about the quota.
    const int64_t size = ((max_bytes + max_files * 256 + (8 << 20)) + 4095) / 4096 * 4096;
    if (ftruncate(fd.get(), size) != 0) {
      const int e = errno;
      unlink(image.c_str());
      return absl::ErrnoToStatus(e, "size the volume's image");
    }
  }
  std::vector<std::string> mkfs = {options_.mkfs, "-q", "-F", "-b", "4096", "-m", "0",
                                   "-N", absl::StrCat(max_files), "-J", "size=4", "-L", "warden-volume",
                                   "-E", absl::StrCat("root_owner=", kVolumeOwner, ":", kVolumeOwner, ",nodiscard")};
  if (options_.shared) {
    mkfs.insert(mkfs.end(), {"-O", "mmp", "-E", "mmp_update_interval=5"});
  }
  mkfs.push_back(image);
  if (absl::Status made = RunProgram(mkfs); !made.ok()) {
    unlink(image.c_str());
    return made;
  }
  VolumeInfo info;
  info.name = name;
  info.tenant = tenant;
  info.max_bytes = max_bytes;
  info.max_files = max_files;
  info.created_unix_ms = absl::ToUnixMillis(absl::Now());
  absl::Status status = WriteFileAtomically(RecordPath(tenant, name), info.ToJson(), 0600);
  if (status.ok()) {
    // What the empty file system shows used; lost+found goes (a volume is
    // the user's tree, and fsck makes one if ever needed).
    mu_.Unlock();
    auto mounted = Mount(tenant, name);
    mu_.Lock();
    if (mounted.ok()) {
      unlinkat((*mounted)->fd(), "lost+found", AT_REMOVEDIR);
      struct statfs fs;
      if (fstatfs((*mounted)->fd(), &fs) == 0) {
        info.base_bytes = static_cast<int64_t>(fs.f_blocks - fs.f_bfree) * fs.f_bsize;
        info.base_files = static_cast<int64_t>(fs.f_files - fs.f_ffree);
      }
      status = WriteFileAtomically(RecordPath(tenant, name), info.ToJson(), 0600);
    } else {
      status = mounted.status();
    }
  }
  if (!status.ok()) {
    unlink(RecordPath(tenant, name).c_str());
    unlink(image.c_str());
    return status;
  }
  return info;
}

bool VolumeStore::MountedHere(const std::string& tenant, const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = mounted_.find(absl::StrCat(tenant, "/", name));
  return it != mounted_.end() && !it->second.expired();
}

absl::Status VolumeStore::Delete(const std::string& tenant, const std::string& name) {
  ASSIGN_OR_RETURN(VolumeInfo info, Get(tenant, name));
  const std::string image = ImagePath(tenant, name);
  UniqueFd fd(open(image.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd) {
    while (flock(fd.get(), LOCK_EX) != 0 && errno == EINTR) {
    }
    struct stat st;
    if (fstat(fd.get(), &st) == 0 && (MountedHere(tenant, name) || ExistingLoop(st))) {
      return absl::FailedPreconditionError(
          absl::StrCat("volume '", name, "' is in use: a session has it mounted, or a file of it is being read or ",
                       "written; close the sessions that use it first"));
    }
  }
  unlink(RecordPath(tenant, name).c_str());
  unlink(image.c_str());
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<VolumeStore::Mounted>> VolumeStore::Mount(const std::string& tenant,
                                                                         const std::string& name) {
  ASSIGN_OR_RETURN(VolumeInfo info, Get(tenant, name));
  const std::string key = absl::StrCat(tenant, "/", name);
  absl::MutexLock lock(&mu_);
  if (auto it = mounted_.find(key); it != mounted_.end()) {
    if (auto alive = it->second.lock()) return alive;
  }
  const std::string image = ImagePath(tenant, name);
  UniqueFd image_fd(open(image.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!image_fd) return absl::ErrnoToStatus(errno, absl::StrCat("open the volume's image ", image));
  // One mount of it per host: whoever comes second finds the loop device.
  // The lock is on a description of its own: the loop device keeps
  // image_fd's (and a flock on it) for as long as it exists.
  UniqueFd lock_fd(open(image.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!lock_fd) return absl::ErrnoToStatus(errno, absl::StrCat("open the volume's image ", image));
  while (flock(lock_fd.get(), LOCK_EX) != 0 && errno == EINTR) {
  }
  struct stat st;
  if (fstat(image_fd.get(), &st) != 0) return absl::ErrnoToStatus(errno, "stat the volume's image");
  UniqueFd loop = ExistingLoop(st);
  if (!loop) {
    ASSIGN_OR_RETURN(loop, AttachLoop(image_fd.get(), image));
  }
  ASSIGN_OR_RETURN(UniqueFd mount, MountExt4(loop.get()));
  auto mounted = std::shared_ptr<Mounted>(new Mounted);
  mounted->info_ = std::move(info);
  mounted->mount_ = std::move(mount);
  mounted_[key] = mounted;
  for (auto it = mounted_.begin(); it != mounted_.end();) it = it->second.expired() ? mounted_.erase(it) : std::next(it);
  return mounted;
}

VolumeStore::Mounted::~Mounted() = default;

absl::StatusOr<VolumeUsage> VolumeStore::Mounted::Usage() const {
  struct statfs fs;
  if (fstatfs(mount_.get(), &fs) != 0) return absl::ErrnoToStatus(errno, "statfs the volume");
  VolumeUsage u;
  u.used_bytes = std::max<int64_t>(0, static_cast<int64_t>(fs.f_blocks - fs.f_bfree) * fs.f_bsize - info_.base_bytes);
  u.used_files = std::max<int64_t>(0, static_cast<int64_t>(fs.f_files - fs.f_ffree) - info_.base_files);
  return u;
}

absl::StatusOr<VolumeEntry> VolumeStore::Mounted::Write(const std::string& path,
                                                        const std::function<absl::StatusOr<std::string>()>& next,
                                                        bool make_parents, const EntryAttributes& attrs) {
  RETURN_IF_ERROR(CheckVolumePath(path));
  if (path.empty()) return absl::InvalidArgumentError("write needs a file's path");
  std::string name;
  EntryAttributes dir_attrs;
  dir_attrs.uid = attrs.uid;
  dir_attrs.gid = attrs.gid;
  ASSIGN_OR_RETURN(UniqueFd dir, ParentOf(mount_.get(), path, make_parents, dir_attrs, &name));
  UniqueFd fd(openat(dir.get(), name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                     attrs.mode.value_or(0644)));
  if (!fd) return Errno(errno, "create", path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a file"));
  fchown(fd.get(), attrs.uid.value_or(kVolumeOwner), attrs.gid.value_or(kVolumeOwner));
  if (attrs.mode) fchmod(fd.get(), *attrs.mode & 07777);
  for (;;) {
    ASSIGN_OR_RETURN(std::string chunk, next());
    if (chunk.empty()) break;
    size_t done = 0;
    while (done < chunk.size()) {
      ssize_t n = write(fd.get(), chunk.data() + done, chunk.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno(errno, "write", path);
      done += static_cast<size_t>(n);
    }
  }
  if (fsync(fd.get()) != 0 && errno == ENOSPC) return Errno(ENOSPC, "write", path);
  return StatAt(dir.get(), name, path);
}

absl::Status VolumeStore::Mounted::Read(const std::string& path, int64_t max_bytes,
                                        const std::function<bool(const std::string&, int64_t)>& sink) {
  RETURN_IF_ERROR(CheckVolumePath(path));
  if (path.empty()) return absl::InvalidArgumentError("read needs a file's path");
  UniqueFd fd(OpenAt2(mount_.get(), path.c_str(), O_RDONLY | O_NOFOLLOW, 0, Resolve::kBeneath));
  if (!fd) return Errno(errno, "open", path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a file"));
  if (st.st_size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' holds ", st.st_size, " bytes; the server's maximum is ", max_bytes));
  }
  std::string chunk(1 << 20, '\0');
  int64_t sent = 0;
  bool first = true;
  for (;;) {
    ssize_t n = read(fd.get(), chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(errno, "read", path);
    if (n == 0 && !first) break;
    first = false;
    sent += n;
    if (sent > max_bytes) return absl::InvalidArgumentError(absl::StrCat("'", path, "' grew past the maximum"));
    if (!sink(chunk.substr(0, static_cast<size_t>(n)), st.st_size)) return absl::CancelledError("the reader went away");
    if (n == 0) break;
  }
  return absl::OkStatus();
}

absl::StatusOr<VolumeEntry> VolumeStore::Mounted::Stat(const std::string& path) {
  RETURN_IF_ERROR(CheckVolumePath(path));
  if (path.empty()) return StatAt(mount_.get(), "", "");
  std::string name;
  ASSIGN_OR_RETURN(UniqueFd dir, ParentOf(mount_.get(), path, false, {}, &name));
  return StatAt(dir.get(), name, path);
}

absl::StatusOr<std::vector<VolumeEntry>> VolumeStore::Mounted::List(const std::string& path, int depth,
                                                                    size_t max_entries) {
  RETURN_IF_ERROR(CheckVolumePath(path));
  if (depth <= 0) depth = 1;
  UniqueFd root(path.empty() ? openat(mount_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                             : OpenAt2(mount_.get(), path.c_str(), O_RDONLY | O_DIRECTORY, 0, Resolve::kBeneath));
  if (!root) return Errno(errno, "list", path);
  std::vector<VolumeEntry> out;
  std::function<absl::Status(int, const std::string&, int)> walk = [&](int dir, const std::string& rel,
                                                                      int level) -> absl::Status {
    UniqueFd scan(openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR* d = fdopendir(scan.Release());
    if (d == nullptr) return Errno(errno, "list", rel);
    std::vector<std::string> names;
    while (struct dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      if (out.size() >= max_entries) {
        return absl::ResourceExhaustedError(absl::StrCat("the listing passed ", max_entries, " entries: list a subdirectory"));
      }
      const std::string child = rel.empty() ? name : absl::StrCat(rel, "/", name);
      auto entry = StatAt(dir, name, child);
      if (!entry.ok()) continue;
      out.push_back(*entry);
      if (entry->type == 'd' && level < depth) {
        UniqueFd sub(openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (sub) RETURN_IF_ERROR(walk(sub.get(), child, level + 1));
      }
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(walk(root.get(), path, 1));
  return out;
}

absl::StatusOr<VolumeEntry> VolumeStore::Mounted::MakeDirectory(const std::string& path, bool make_parents,
                                                                const EntryAttributes& attrs) {
  RETURN_IF_ERROR(CheckVolumePath(path));
  if (path.empty()) return absl::AlreadyExistsError("the volume's root exists");
  std::string name;
  EntryAttributes dir_attrs = attrs;
  dir_attrs.mode.reset();
  ASSIGN_OR_RETURN(UniqueFd dir, ParentOf(mount_.get(), path, make_parents, dir_attrs, &name));
  if (mkdirat(dir.get(), name.c_str(), attrs.mode.value_or(0755)) != 0) return Errno(errno, "mkdir", path);
  fchownat(dir.get(), name.c_str(), attrs.uid.value_or(kVolumeOwner), attrs.gid.value_or(kVolumeOwner),
           AT_SYMLINK_NOFOLLOW);
  if (attrs.mode) fchmodat(dir.get(), name.c_str(), *attrs.mode & 07777, 0);
  return StatAt(dir.get(), name, path);
}

absl::Status VolumeStore::Mounted::Remove(const std::string& path) {
  RETURN_IF_ERROR(CheckVolumePath(path));
  if (path.empty()) return absl::InvalidArgumentError("the volume's root cannot be removed: delete the volume");
  std::string name;
  ASSIGN_OR_RETURN(UniqueFd dir, ParentOf(mount_.get(), path, false, {}, &name));
  struct stat st;
  if (fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Errno(errno, "remove", path);
  return RemoveTreeAt(dir.get(), name.c_str());
}

absl::StatusOr<VolumeEntry> VolumeStore::Mounted::SetAttributes(const std::string& path, const EntryAttributes& attrs) {
  RETURN_IF_ERROR(CheckVolumePath(path));
  UniqueFd dir;
  std::string name;
  if (path.empty()) {
    dir.Reset(openat(mount_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  } else {
    ASSIGN_OR_RETURN(dir, ParentOf(mount_.get(), path, false, {}, &name));
  }
  const int flags = AT_SYMLINK_NOFOLLOW | (name.empty() ? AT_EMPTY_PATH : 0);
  if ((attrs.uid || attrs.gid) &&
      fchownat(dir.get(), name.c_str(), attrs.uid ? *attrs.uid : static_cast<uid_t>(-1),
               attrs.gid ? *attrs.gid : static_cast<gid_t>(-1), flags) != 0) {
    return Errno(errno, "chown", path);
  }
  if (attrs.mode) {
    struct stat st;
    if (fstatat(dir.get(), name.c_str(), &st, flags) != 0) return Errno(errno, "stat", path);
    if (S_ISLNK(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat("'", path, "' is a symlink: it has no mode"));
    UniqueFd target(name.empty() ? fcntl(dir.get(), F_DUPFD_CLOEXEC, 3)
                                 : openat(dir.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!target || fchmodat(AT_FDCWD, absl::StrCat("/proc/self/fd/", target.get()).c_str(), *attrs.mode & 07777, 0) != 0) {
      return Errno(errno, "chmod", path);
    }
  }
  return name.empty() ? StatAt(dir.get(), "", "") : StatAt(dir.get(), name, path);
}

}  // namespace warden::images
