#include "sandbox/mount_plan.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>  // glibc 2.36: open_tree, move_mount, fsopen, mount_setattr
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string.h>

#include <dirent.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace warden {
namespace {

constexpr uint64_t kReadOnlyAttrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

std::string Relative(const std::string& absolute) { return absolute.substr(1); }

MountOp Dir(std::string target) {
  MountOp op;
  op.kind = MountOp::Kind::kDir;
  op.target = std::move(target);
  return op;
}

MountOp Symlink(std::string target, std::string link_text) {
  MountOp op;
  op.kind = MountOp::Kind::kSymlink;
  op.target = std::move(target);
  op.source = std::move(link_text);
  return op;
}

MountOp File(std::string target, std::string contents) {
  MountOp op;
  op.kind = MountOp::Kind::kFile;
  op.target = std::move(target);
  op.contents = std::move(contents);
  return op;
}

MountOp Bind(std::string source, std::string target, uint64_t attrs, bool is_file) {
  MountOp op;
  op.kind = MountOp::Kind::kBind;
  op.source = std::move(source);
  op.target = std::move(target);
  op.attrs = attrs;
  op.target_is_file = is_file;
  return op;
}

MountOp Tmpfs(std::string target, int64_t size, mode_t mode, uid_t uid, gid_t gid,
              uint64_t attrs) {
  MountOp op;
  op.kind = MountOp::Kind::kTmpfs;
  op.target = std::move(target);
  op.size_bytes = size;
  op.mode = mode;
  op.uid = uid;
  op.gid = gid;
  op.attrs = attrs;
  op.size_text = absl::StrCat(size);
  char mode_buf[16];
  snprintf(mode_buf, sizeof(mode_buf), "%o", static_cast<unsigned>(mode));
  op.mode_text = mode_buf;
  // Owner 0 means "the init's own ids", the tmpfs default: rootless, the
  // namespace's uid 0 is not even mapped.
  if (uid != 0) op.uid_text = absl::StrCat(uid);
  if (gid != 0) op.gid_text = absl::StrCat(gid);
  return op;
}

MountOp BindInRoot(std::string source, std::string target, uint64_t attrs) {
  MountOp op;
  op.kind = MountOp::Kind::kBindInRoot;
  op.source = std::move(source);
  op.target = std::move(target);
  op.attrs = attrs;
  op.target_is_file = true;
  return op;
}

MountOp Seal(std::string target) {
  MountOp op;
  op.kind = MountOp::Kind::kSeal;
  op.target = std::move(target);
  return op;
}

// Adds the host path `path` (e.g. "/lib") to the plan: a symlink if the host
// has one there, a read-only bind if it is a directory or file, nothing if it
// is missing.
void AddHostPath(const std::string& host_path, const std::string& target,
                 std::vector<MountOp>& ops) {
  struct stat st;
  if (lstat(host_path.c_str(), &st) != 0) return;
  if (S_ISLNK(st.st_mode)) {
    char buf[4096];
    ssize_t n = readlink(host_path.c_str(), buf, sizeof(buf) - 1);
    if (n <= 0) return;
    ops.push_back(Symlink(Relative(target), std::string(buf, n)));
    return;
  }
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return;
  ops.push_back(Bind(host_path, Relative(target), kReadOnlyAttrs, S_ISREG(st.st_mode)));
}

absl::Status CheckCaBundleSource(const std::string& source) {
  if (source[0] == '/') return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("CA bundle source '", source, "' must be an absolute host path"));
}

size_t Depth(const std::string& path) { return std::count(path.begin(), path.end(), '/'); }

// The generated /etc/passwd and /etc/group: the template's own lines (none
// for the host's runtime) but any of the sandbox user's uid or name, then
// root's if missing, then the sandbox user's.
std::string AccountsFile(const std::string& base, const std::string& name, unsigned id, const std::string& own_line,
                         const std::string& root_line, const std::string& extra) {
  std::string out;
  bool has_root = false;
  for (absl::string_view line : absl::StrSplit(base, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ':');
    if (fields.size() < 3) continue;
    if (fields[0] == name || fields[2] == absl::StrCat(id)) continue;
    if (fields[0] == "root") has_root = true;
    absl::StrAppend(&out, line, "\n");
  }
  std::string head = has_root ? "" : root_line;
  return absl::StrCat(head, out, own_line, out.empty() ? extra : "");
}

// The template's entries a plan binds: its top-level entries, and for a
// "split" directory (a mount target lies in it where the template has
// nothing) its own entries in a tmpfs over it.
class TemplateTree {
 public:
  explicit TemplateTree(const std::string& root) : root_(root) {}

  // Notes that `target` (absolute, validated) must be creatable: the
  // deepest directory of the template on its way is split. A target the
  // template already has (as a directory, or a file for a file bind) needs
  // nothing. `exists_ok` false: the target must not exist (a symlink).
  absl::Status Need(const std::string& target, bool file, bool exists_ok) {
    std::vector<std::string> parts = absl::StrSplit(target.substr(1), '/');
    if (kManaged.count(parts[0]) || parts[0] == "etc") return absl::OkStatus();
    std::string rel;
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string next = rel.empty() ? parts[i] : absl::StrCat(rel, "/", parts[i]);
      struct stat st;
      if (lstat(absl::StrCat(root_, "/", next).c_str(), &st) != 0) {
        if (errno != ENOENT) return absl::ErrnoToStatus(errno, absl::StrCat("stat the template's /", next));
        if (!rel.empty()) split_.insert(rel);  // at the top the root's own tmpfs has room
        return absl::OkStatus();
      }
      const bool last = i + 1 == parts.size();
      if (last && !exists_ok && rel.empty()) {
        // A top-level entry (the store's /workspace mount point, when E2B
        // names /home/user the workspace and /workspace its alias): left
        // out of the root, which has room for the link itself.
        shadowed_.insert(next);
        return absl::OkStatus();
      }
      if (last && !exists_ok) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot make ", target, ": the template has something there already"));
      }
      if (S_ISDIR(st.st_mode)) {
        rel = next;
        continue;
      }
      if (last && file && S_ISREG(st.st_mode)) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot mount at ", target, ": the template has a ", S_ISLNK(st.st_mode) ? "symlink" : "file", " at /",
          next, "; choose a path outside it"));
    }
    return absl::OkStatus();
  }

  // The operations: every top-level entry but Warden's own (/proc, /dev,
  // /tmp, /sys; /etc is the caller's), each split directory a tmpfs: one
  // in a split directory as it is reached, one deeper in a directory bound
  // whole over its own entry there (which a read-only bind can take).
  absl::Status Emit(std::vector<MountOp>& ops, std::vector<std::string>& seals) const {
    RETURN_IF_ERROR(EmitChildren("", ops, seals, 0));
    std::vector<std::string> nested;
    for (const std::string& dir : split_) {
      const size_t slash = dir.rfind('/');
      if (slash != std::string::npos && !split_.count(dir.substr(0, slash))) nested.push_back(dir);
    }
    std::sort(nested.begin(), nested.end(), [](const std::string& a, const std::string& b) {
      return Depth(a) < Depth(b);
    });
    for (const std::string& dir : nested) {
      struct stat st;
      if (lstat(absl::StrCat(root_, "/", dir).c_str(), &st) != 0) continue;
      ops.push_back(Tmpfs(dir, 1 << 20, st.st_mode & 07777, 0, 0, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
      seals.push_back(dir);
      RETURN_IF_ERROR(EmitChildren(dir, ops, seals, 1));
    }
    return absl::OkStatus();
  }

  static inline const std::set<std::string> kManaged = {"proc", "dev", "tmp", "sys", "etc"};

 private:
  absl::Status EmitChildren(const std::string& rel, std::vector<MountOp>& ops, std::vector<std::string>& seals,
                            int depth) const {
    const std::string dir = rel.empty() ? root_ : absl::StrCat(root_, "/", rel);
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("open the template's /", rel));
    std::vector<std::string> names;
    while (struct dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    if (!rel.empty() && names.size() > 64) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a mount target lies in the template's /", rel, ", which holds ", names.size(),
          " entries (Warden would bind each): choose a path outside it"));
    }
    for (const std::string& name : names) {
      if (rel.empty() && (kManaged.count(name) || shadowed_.count(name))) continue;
      const std::string path = rel.empty() ? name : absl::StrCat(rel, "/", name);
      const std::string host = absl::StrCat(root_, "/", path);
      struct stat st;
      if (lstat(host.c_str(), &st) != 0) continue;
      if (S_ISLNK(st.st_mode)) {
        char buf[4096];
        ssize_t n = readlink(host.c_str(), buf, sizeof(buf) - 1);
        if (n > 0) ops.push_back(Symlink(path, std::string(buf, n)));
        continue;
      }
      if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) continue;
      if (S_ISDIR(st.st_mode) && split_.count(path)) {
        ops.push_back(Tmpfs(path, 1 << 20, st.st_mode & 07777, 0, 0, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
        seals.push_back(path);
        if (depth > 32) return absl::InvalidArgumentError("mount targets nest too deep in the template");
        RETURN_IF_ERROR(EmitChildren(path, ops, seals, depth + 1));
        continue;
      }
      MountOp bind = Bind(host, path, kReadOnlyAttrs, S_ISREG(st.st_mode));
      bind.idmap = BindMount::Idmap::kPreferred;
      ops.push_back(std::move(bind));
    }
    return absl::OkStatus();
  }

  std::string root_;
  std::set<std::string> split_;  // relative paths of the directories to split
  std::set<std::string> shadowed_;  // top-level entries a link of the plan's takes the place of
};

}  // namespace

absl::Status ValidateSandboxPath(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("sandbox path '", path, "' must be absolute, e.g. /data"));
  }
  if (path == "/") return absl::InvalidArgumentError("the sandbox root '/' cannot be a mount target");
  if (path.size() > 1024) return absl::InvalidArgumentError("sandbox path is longer than 1024 bytes");
  if (path.back() == '/') {
    return absl::InvalidArgumentError(absl::StrCat("sandbox path '", path, "' must not end in '/'"));
  }
  for (absl::string_view part : absl::StrSplit(absl::string_view(path).substr(1), '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "sandbox path '", path, "' must be normalised: no empty, '.' or '..' components"));
    }
    if (part.find('\0') != absl::string_view::npos) {
      return absl::InvalidArgumentError("sandbox path contains a NUL byte");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MountPlan> BuildMountPlan(const FilesystemSpec& spec) {
  MountPlan plan;
  auto& ops = plan.ops;
  std::set<std::string> reserved = {"/proc", "/dev", "/etc", "/tmp"};

  if (auto s = ValidateSandboxPath(spec.workspace); !s.ok()) return s;
  if (spec.tmpfs_bytes < (1 << 20)) {
    return absl::InvalidArgumentError("tmpfs size must be at least 1 MiB");
  }

  // Split template directories, sealed read-only last.
  std::vector<std::string> seals;
  if (spec.root.empty()) {
    for (const std::string& path : spec.runtime_paths) {
      if (auto s = ValidateSandboxPath(path); !s.ok()) return s;
      if (reserved.count(path)) {
        return absl::InvalidArgumentError(absl::StrCat("runtime path ", path, " is reserved"));
      }
      AddHostPath(path, path, ops);
    }
  } else {
    struct stat st;
    if (spec.root[0] != '/' || stat(spec.root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("the template's root ", spec.root, " is not a directory"));
    }
    TemplateTree tree(spec.root);
    if (auto s = ValidateSandboxPath(spec.workspace); !s.ok()) return s;
    RETURN_IF_ERROR(tree.Need(spec.workspace, false, true));
    for (const BindMount& bind : spec.binds) {
      if (auto s = ValidateSandboxPath(bind.target); !s.ok()) return s;
      struct stat source;
      const int rc = bind.source_fd >= 0 ? fstat(bind.source_fd, &source) : stat(bind.source.c_str(), &source);
      RETURN_IF_ERROR(tree.Need(bind.target, rc == 0 && !S_ISDIR(source.st_mode), true));
    }
    for (const std::string& dir : spec.dirs) {
      if (auto s = ValidateSandboxPath(dir); !s.ok()) return s;
      RETURN_IF_ERROR(tree.Need(dir, false, true));
    }
    for (const auto& link : spec.links) {
      if (auto s = ValidateSandboxPath(link.first); !s.ok()) return s;
      RETURN_IF_ERROR(tree.Need(link.first, false, false));
    }
    RETURN_IF_ERROR(tree.Emit(ops, seals));
  }

  const std::string uid = absl::StrCat(spec.sandbox_uid), gid = absl::StrCat(spec.sandbox_gid);
  struct stat template_etc;
  const std::string etc_host = spec.root + "/etc";
  if (!spec.root.empty() && lstat(etc_host.c_str(), &template_etc) == 0 && S_ISDIR(template_etc.st_mode)) {
    // The template's /etc, with Warden's files over its own (the store
    // makes sure a template has each; one it lacks is not generated).
    MountOp etc = Bind(etc_host, "etc", kReadOnlyAttrs, false);
    etc.idmap = BindMount::Idmap::kPreferred;
    ops.push_back(std::move(etc));
    const std::string own_user = absl::StrCat(spec.user_name, ":x:", uid, ":", gid, ":Warden sandbox:",
                                              spec.workspace, ":/bin/sh\n");
    const std::pair<const char*, std::string> generated[] = {
        {"passwd", AccountsFile(spec.passwd_base, spec.user_name, spec.sandbox_uid, own_user,
                                "root:x:0:0:root:/root:/usr/sbin/nologin\n",
                                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")},
        {"group", AccountsFile(spec.group_base, spec.user_name, spec.sandbox_gid,
                               absl::StrCat(spec.user_name, ":x:", gid, ":\n"), "root:x:0:\n", "nogroup:x:65534:\n")},
        {"hosts", absl::StrCat("127.0.0.1\tlocalhost ", spec.hostname, "\n::1\tlocalhost ip6-localhost ip6-loopback\n")},
        {"hostname", spec.hostname + "\n"},
        {"resolv.conf", "# The sandbox has no resolver; its way out is the proxy in $HTTPS_PROXY.\n"},
    };
    for (const auto& [name, contents] : generated) {
      struct stat st;
      if (lstat(absl::StrCat(etc_host, "/", name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      const std::string staged = absl::StrCat(".warden-etc-", name);
      ops.push_back(File(staged, contents));
      ops.push_back(BindInRoot(staged, absl::StrCat("etc/", name), kReadOnlyAttrs | MOUNT_ATTR_NOEXEC));
    }
    // The CA bundle goes over the template's own, where the image has one
    // (a read-only /etc takes mounts on its files, never new files). An
    // image without one trusts no CA at all, as under Docker.
    if (!spec.ca_bundle_source.empty()) {
      RETURN_IF_ERROR(CheckCaBundleSource(spec.ca_bundle_source));
      struct stat st;
      if (lstat((etc_host + "/ssl").c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
          lstat((etc_host + "/ssl/certs").c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
          lstat((etc_host + "/ssl/certs/ca-certificates.crt").c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        ops.push_back(Bind(spec.ca_bundle_source, Relative(kSandboxCaBundle), kReadOnlyAttrs | MOUNT_ATTR_NOEXEC,
                           /*is_file=*/true));
      }
    }
  } else {
    // /etc: generated files first, then read-only host entries.
    ops.push_back(Dir("etc"));
    ops.push_back(File("etc/passwd",
                       absl::StrCat("root:x:0:0:root:/root:/usr/sbin/nologin\n", spec.user_name,
                                    ":x:", uid, ":", gid, ":Warden sandbox:", spec.workspace,
                                    ":/bin/bash\n"
                                    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")));
    ops.push_back(File("etc/group", absl::StrCat("root:x:0:\n", spec.user_name, ":x:", gid,
                                                 ":\nnogroup:x:65534:\n")));
    ops.push_back(File("etc/hosts", absl::StrCat("127.0.0.1\tlocalhost ", spec.hostname,
                                                 "\n::1\tlocalhost ip6-localhost ip6-loopback\n")));
    ops.push_back(File("etc/hostname", spec.hostname + "\n"));
    ops.push_back(File("etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n"));
    // No resolver: names are resolved by the egress proxy, on the host.
    ops.push_back(File("etc/resolv.conf", "# The sandbox has no resolver; its way out is the proxy in $HTTPS_PROXY.\n"));
    if (!spec.ca_bundle_source.empty()) {
      RETURN_IF_ERROR(CheckCaBundleSource(spec.ca_bundle_source));
      ops.push_back(Dir("etc/ssl"));
      ops.push_back(Dir("etc/ssl/certs"));
      ops.push_back(Bind(spec.ca_bundle_source, Relative(kSandboxCaBundle), kReadOnlyAttrs | MOUNT_ATTR_NOEXEC,
                         /*is_file=*/true));
    }
    for (const std::string& entry : spec.root.empty() ? spec.host_etc_entries : std::vector<std::string>{}) {
      if (entry.empty() || entry.find('/') != std::string::npos || entry == "." || entry == "..") {
        return absl::InvalidArgumentError(absl::StrCat("host /etc entry '", entry, "' must be a plain name"));
      }
      AddHostPath("/etc/" + entry, "/etc/" + entry, ops);
    }
  }

  // /proc, /dev, /tmp, the workspace.
  ops.push_back(Dir("proc"));
  MountOp proc;
  proc.kind = MountOp::Kind::kProc;
  proc.target = "proc";
  proc.attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
  ops.push_back(proc);
  // /proc/locks lists every open file description lock on the host (the
  // kernel filters only POSIX locks by pid namespace): masked as Docker masks
  // its paths, by /dev/null bound read-only over it (read: empty).
  ops.push_back(Bind("/dev/null", "proc/locks", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
                     /*is_file=*/true));
  if (!spec.boot_id_source.empty()) {
    if (spec.boot_id_source[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("boot id source '", spec.boot_id_source, "' must be an absolute host path"));
    }
    ops.push_back(Bind(spec.boot_id_source, "proc/sys/kernel/random/boot_id", kReadOnlyAttrs | MOUNT_ATTR_NOEXEC,
                       /*is_file=*/true));
  }

  ops.push_back(Tmpfs("dev", 1 << 20, 0755, 0, 0, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC));
  for (const char* dev : {"null", "zero", "full", "random", "urandom"}) {
    ops.push_back(Bind(absl::StrCat("/dev/", dev), absl::StrCat("dev/", dev),
                       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, /*is_file=*/true));
  }
  if (spec.terminals) {
    ops.push_back(Bind("/dev/tty", "dev/tty", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, /*is_file=*/true));
    MountOp pts;
    pts.kind = MountOp::Kind::kDevpts;
    pts.target = "dev/pts";
    pts.attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;
    pts.size_text = absl::StrCat(kMaxTerminals);
    ops.push_back(pts);
    ops.push_back(Symlink("dev/ptmx", "pts/ptmx"));
  }
  ops.push_back(Symlink("dev/fd", "/proc/self/fd"));
  ops.push_back(Symlink("dev/stdin", "/proc/self/fd/0"));
  ops.push_back(Symlink("dev/stdout", "/proc/self/fd/1"));
  ops.push_back(Symlink("dev/stderr", "/proc/self/fd/2"));
  ops.push_back(Tmpfs("dev/shm", spec.tmpfs_bytes, 01777, 0, 0,
                      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC));
  ops.push_back(Tmpfs("tmp", spec.tmpfs_bytes, 01777, 0, 0, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));

  if (reserved.count(spec.workspace)) {
    return absl::InvalidArgumentError(absl::StrCat("workspace ", spec.workspace, " is reserved"));
  }
  if (spec.workspace_source.empty()) {
    ops.push_back(Tmpfs(Relative(spec.workspace), spec.tmpfs_bytes, 0755, spec.sandbox_uid,
                        spec.sandbox_gid, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
  } else {
    struct stat st;
    if (stat(spec.workspace_source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "workspace source ", spec.workspace_source, " is not an existing directory"));
    }
    ops.push_back(Bind(spec.workspace_source, Relative(spec.workspace),
                       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false));
  }

  // Extra binds: shallow targets first, so a bind may nest inside another.
  std::vector<BindMount> binds = spec.binds;
  std::stable_sort(binds.begin(), binds.end(), [](const BindMount& a, const BindMount& b) {
    return Depth(a.target) < Depth(b.target);
  });
  std::set<std::string> targets;
  for (const BindMount& bind : binds) {
    if (auto s = ValidateSandboxPath(bind.target); !s.ok()) return s;
    if (bind.source_fd < 0 && (bind.source.empty() || bind.source[0] != '/')) {
      return absl::InvalidArgumentError(
          absl::StrCat("bind source '", bind.source, "' must be an absolute host path"));
    }
    for (const std::string& r : reserved) {
      if (bind.target == r || bind.target.rfind(r + "/", 0) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bind target ", bind.target, " is inside ", r, ", which Warden manages"));
      }
    }
    if (!targets.insert(bind.target).second) {
      return absl::InvalidArgumentError(absl::StrCat("bind target ", bind.target, " is used twice"));
    }
    struct stat st;
    if (bind.source_fd >= 0 ? fstat(bind.source_fd, &st) != 0 : stat(bind.source.c_str(), &st) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bind source ", bind.source, " does not exist on the host"));
    }
    uint64_t attrs = bind.writable ? (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV) : kReadOnlyAttrs;
    MountOp op = Bind(bind.source, Relative(bind.target), attrs, !S_ISDIR(st.st_mode));
    op.source_fd = bind.source_fd;
    op.idmap = bind.idmap;
    ops.push_back(std::move(op));
  }

  for (const std::string& dir : spec.dirs) {
    if (auto s = ValidateSandboxPath(dir); !s.ok()) return s;
    ops.push_back(Dir(Relative(dir)));
  }
  for (const auto& [path, text] : spec.links) {
    if (auto s = ValidateSandboxPath(path); !s.ok()) return s;
    if (text.empty() || text.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("the symlink ", path, " needs a target"));
    }
    ops.push_back(Symlink(Relative(path), text));
  }

  // Split directories last but the root: everything in them is in place.
  for (auto it = seals.rbegin(); it != seals.rend(); ++it) ops.push_back(Seal(*it));
  MountOp seal;
  seal.kind = MountOp::Kind::kSealRoot;
  ops.push_back(seal);
  if (ops.size() > static_cast<size_t>(kMaxMountOps)) {
    return absl::InvalidArgumentError(absl::StrCat("the sandbox's filesystem needs ", ops.size(),
                                                   " mount operations; at most ", kMaxMountOps,
                                                   " fit: bind fewer paths"));
  }
  return plan;
}

absl::StatusOr<std::vector<UniqueFd>> OpenBindSources(const MountPlan& plan) {
  std::vector<UniqueFd> trees;
  for (const MountOp& op : plan.ops) {
    if (op.kind != MountOp::Kind::kBind) continue;
    // Recursive: whatever the host mounted beneath the source comes along,
    // so nothing it covers on the host is uncovered in the sandbox.
    UniqueFd tree(op.source_fd >= 0
                      ? open_tree(op.source_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH)
                      : open_tree(AT_FDCWD, op.source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
    if (!tree) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot open ", op.source, " to bind it at /", op.target, ": ", strerror(errno)));
    }
    // Private: a copy of a shared host mount (systemd makes / shared) would
    // join the host's peer group, and mounts would then propagate between
    // the host and the sandbox in both directions.
    struct mount_attr attr = {};
    attr.attr_set = op.attrs;
    attr.propagation = MS_PRIVATE;
    if (mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("mount_setattr on the copy of ", op.source));
    }
    trees.push_back(std::move(tree));
  }
  return trees;
}

bool NeedsIdmap(const MountPlan& plan) {
  for (const MountOp& op : plan.ops) {
    if (op.kind == MountOp::Kind::kBind && op.idmap != BindMount::Idmap::kNone) return true;
  }
  return false;
}

absl::Status IdmapBindSources(const MountPlan& plan, const std::vector<UniqueFd>& trees, int userns_fd) {
  size_t next = 0;
  for (const MountOp& op : plan.ops) {
    if (op.kind != MountOp::Kind::kBind) continue;
    if (next >= trees.size()) return absl::InternalError("fewer bind sources than binds");
    const int tree = trees[next++].get();
    if (op.idmap == BindMount::Idmap::kNone) continue;
    struct mount_attr attr = {};
    attr.attr_set = MOUNT_ATTR_IDMAP;
    attr.userns_fd = static_cast<uint64_t>(userns_fd);
    if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) == 0) continue;
    const int e = errno;
    // A file system without idmapped mounts (NFS, before Linux 5.12 any)
    // shows a template's files as nobody's, as they would be without.
    if (op.idmap == BindMount::Idmap::kPreferred && (e == EINVAL || e == EPERM || e == ENOSYS)) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot give the sandbox /", op.target, " with its owners mapped (an idmapped mount): ", strerror(e),
        e == EINVAL ? "; its file system does not support idmapped mounts (ext4, xfs, btrfs and tmpfs do)" : ""));
  }
  return absl::OkStatus();
}

std::vector<std::string> MountPlan::Describe() const {
  std::vector<std::string> out;
  for (const MountOp& op : ops) {
    if (op.kind == MountOp::Kind::kSealRoot || op.kind == MountOp::Kind::kSeal) continue;
    if (op.kind == MountOp::Kind::kFile && op.target.rfind(".warden-etc-", 0) == 0) continue;  // staged, removed
    out.push_back("/" + op.target);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Child side. Everything below runs after clone() in the sandbox's init and
// must stay async-signal-safe: system calls and stack buffers only.
// ---------------------------------------------------------------------------
namespace {

// Opens (creating as needed) the directory or file `rel` beneath `root_fd`,
// refusing to follow any symlink on the way: a writable bind could hold a
// planted link that would otherwise redirect a mount, or a mkdir, to the host.
// Returns an O_PATH fd or -errno.
int OpenBeneath(int root_fd, const char* rel, bool create, bool is_file) {
  char buf[1100];
  size_t len = 0;
  while (rel[len] != '\0') {
    if (len + 1 >= sizeof(buf)) return -ENAMETOOLONG;
    buf[len] = rel[len];
    ++len;
  }
  buf[len] = '\0';
  int dir = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
  if (dir < 0) return -errno;
  char* component = buf;
  while (true) {
    char* slash = component;
    while (*slash != '\0' && *slash != '/') ++slash;
    const bool last = (*slash == '\0');
    *slash = '\0';
    int next;
    if (last && is_file) {
      if (create) {
        // O_EXCL: an existing file (a procfs entry bound over) is left as
        // it is, never opened for writing.
        int fd = openat(dir, component, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST && errno != EISDIR) {
          int err = errno;
          close(dir);
          return -err;
        }
        if (fd >= 0) close(fd);
      }
      next = openat(dir, component, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (next >= 0) {
        struct stat st;
        if (fstat(next, &st) != 0 || S_ISLNK(st.st_mode)) {
          close(next);
          close(dir);
          return -ELOOP;
        }
      }
    } else {
      next = openat(dir, component, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
      if (next < 0 && errno == ENOENT && create) {
        if (mkdirat(dir, component, 0755) != 0 && errno != EEXIST) {
          int err = errno;
          close(dir);
          return -err;
        }
        next = openat(dir, component, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
      }
    }
    int err = errno;
    close(dir);
    if (next < 0) return -err;  // ENOTDIR here means a symlink or file was in the way
    dir = next;
    if (last) return dir;
    component = slash + 1;
  }
}

// Attaches the detached mount `tree_fd` on top of `rel` beneath root_fd.
int AttachBeneath(int tree_fd, int root_fd, const char* rel, bool is_file) {
  int target = OpenBeneath(root_fd, rel, /*create=*/true, is_file);
  if (target < 0) return target;
  int rc = move_mount(tree_fd, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
  int err = errno;
  close(target);
  return rc == 0 ? 0 : -err;
}

int SetAttrs(int tree_fd, uint64_t attrs, bool recursive) {
  if (attrs == 0) return 0;
  struct mount_attr attr = {};
  attr.attr_set = attrs;
  unsigned flags = AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0);
  return mount_setattr(tree_fd, "", flags, &attr, sizeof(attr)) == 0 ? 0 : -errno;
}

// Creates a detached filesystem of `type` with `n` key/value options.
int NewFilesystem(const char* type, const char* const* keys, const char* const* values, int n,
                  uint64_t attrs) {
  int fs = fsopen(type, FSOPEN_CLOEXEC);
  if (fs < 0) return -errno;
  for (int i = 0; i < n; ++i) {
    if (fsconfig(fs, FSCONFIG_SET_STRING, keys[i], values[i], 0) != 0) {
      int err = errno;
      close(fs);
      return -err;
    }
  }
  if (fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
    int err = errno;
    close(fs);
    return -err;
  }
  int mnt = fsmount(fs, FSMOUNT_CLOEXEC, attrs);
  int err = errno;
  close(fs);
  return mnt >= 0 ? mnt : -err;
}

// A new filesystem of `type` (NewFilesystem), attached at `rel` beneath
// `root_fd` (AttachBeneath).
int AttachNewFilesystem(const char* type, const char* const* keys, const char* const* values, int n,
                        uint64_t attrs, int root_fd, const char* rel) {
  int mnt = NewFilesystem(type, keys, values, n, attrs);
  if (mnt < 0) return mnt;
  int rc = AttachBeneath(mnt, root_fd, rel, false);
  close(mnt);
  return rc;
}

int WriteAll(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

int ApplyMountPlan(const MountPlan& plan, const int* bind_trees, int n_bind_trees,
                   const char* staging_dir, int* failed_op) {
  *failed_op = -1;
  const int n_ops = static_cast<int>(plan.ops.size());
  if (n_ops > kMaxMountOps) return -E2BIG;

  // The supervisor's detached copies of the bind sources, by operation:
  // exactly one for each bind, or none at all.
  int n_binds = 0;
  for (const MountOp& op : plan.ops) n_binds += op.kind == MountOp::Kind::kBind;
  if (bind_trees != nullptr && n_bind_trees != n_binds) {
    for (int i = 0; i < n_bind_trees; ++i) close(bind_trees[i]);
    return -EINVAL;
  }
  int trees[kMaxMountOps];
  int next_tree = 0;
  for (int i = 0; i < n_ops; ++i) {
    const bool bind = plan.ops[i].kind == MountOp::Kind::kBind;
    trees[i] = bind && bind_trees != nullptr ? bind_trees[next_tree++] : -1;
  }
  auto close_trees = [&] {
    for (int i = 0; i < n_ops; ++i) {
      if (trees[i] >= 0) close(trees[i]);
    }
  };

  // Nothing we mount may propagate back to the host's mount namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    int err = errno;
    close_trees();
    return -err;
  }

  // Without the supervisor's copies (a rootless supervisor cannot make
  // them), open every bind source while the host tree is still in view,
  // with our own credentials: detached, recursive copies (locked submounts
  // stay covered), flags set on the copy.
  for (int i = 0; i < n_ops && bind_trees == nullptr; ++i) {
    const MountOp& op = plan.ops[i];
    if (op.kind != MountOp::Kind::kBind) continue;
    trees[i] = open_tree(AT_FDCWD, op.source.c_str(),
                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    int rc = trees[i] < 0 ? -errno : SetAttrs(trees[i], op.attrs, /*recursive=*/true);
    if (rc < 0) {
      *failed_op = i;
      close_trees();
      return rc;
    }
  }

  // The new root: a small tmpfs at the staging directory.
  char root_size[32];
  {
    // Format plan.root_size_bytes without snprintf (not async-signal-safe).
    char tmp[32];
    int n = 0;
    int64_t v = plan.root_size_bytes;
    do {
      tmp[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v > 0 && n < 31);
    for (int i = 0; i < n; ++i) root_size[i] = tmp[n - 1 - i];
    root_size[n] = '\0';
  }
  const char* root_keys[] = {"size", "mode"};
  const char* root_values[] = {root_size, "755"};
  int root_mnt = NewFilesystem("tmpfs", root_keys, root_values, 2,
                               MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (root_mnt < 0) {
    close_trees();
    return root_mnt;
  }
  if (move_mount(root_mnt, "", AT_FDCWD, staging_dir, MOVE_MOUNT_F_EMPTY_PATH) != 0) {
    int err = errno;
    close(root_mnt);
    close_trees();
    return -err;
  }
  close(root_mnt);
  int root = open(staging_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) {
    close_trees();
    return -errno;
  }

  int rc = 0;
  for (int i = 0; i < n_ops && rc == 0; ++i) {
    const MountOp& op = plan.ops[i];
    const char* target = op.target.c_str();
    switch (op.kind) {
      case MountOp::Kind::kDir: {
        int fd = OpenBeneath(root, target, true, false);
        rc = fd < 0 ? fd : 0;
        if (fd >= 0) close(fd);
        break;
      }
      case MountOp::Kind::kSymlink: {
        // The parent is resolved without following links, like mount targets.
        const char* last = nullptr;
        for (const char* c = target; *c; ++c) {
          if (*c == '/') last = c;
        }
        char parent[1100] = ".";
        if (last != nullptr) {
          size_t plen = static_cast<size_t>(last - target);
          if (plen >= sizeof(parent)) {
            rc = -ENAMETOOLONG;
            break;
          }
          for (size_t k = 0; k < plen; ++k) parent[k] = target[k];
          parent[plen] = '\0';
        }
        int dir = last ? OpenBeneath(root, parent, true, false) : fcntl(root, F_DUPFD_CLOEXEC, 3);
        if (dir < 0) {
          rc = last ? dir : -errno;
          break;
        }
        rc = symlinkat(op.source.c_str(), dir, last ? last + 1 : target) == 0 ? 0 : -errno;
        close(dir);
        break;
      }
      case MountOp::Kind::kFile: {
        // Generated files live in directories of the fresh root tmpfs only.
        int fd = openat(root, target, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) {
          rc = -errno;
          break;
        }
        rc = WriteAll(fd, op.contents.data(), op.contents.size());
        close(fd);
        break;
      }
      case MountOp::Kind::kBind:
        rc = AttachBeneath(trees[i], root, target, op.target_is_file);
        break;
      case MountOp::Kind::kTmpfs: {
        const char* keys[] = {"size", "mode", "uid", "gid"};
        const char* values[] = {op.size_text.c_str(), op.mode_text.c_str(), op.uid_text.c_str(),
                                op.gid_text.c_str()};
        const int n_keys = op.uid_text.empty() ? 2 : 4;
        rc = AttachNewFilesystem("tmpfs", keys, values, n_keys, op.attrs, root, target);
        break;
      }
      case MountOp::Kind::kProc: {
        // hidepid=invisible: the program cannot see processes of other uids
        // (the sandbox's init), not even that they exist.
        const char* keys[] = {"hidepid"};
        const char* values[] = {"invisible"};
        rc = AttachNewFilesystem("proc", keys, values, 1, op.attrs, root, target);
        break;
      }
      case MountOp::Kind::kDevpts: {
        // A fresh instance: the host's terminals are not in it, and the
        // sandbox's are bounded (max).
        const char* keys[] = {"ptmxmode", "mode", "max"};
        const char* values[] = {"0666", "0620", op.size_text.c_str()};
        rc = AttachNewFilesystem("devpts", keys, values, 3, op.attrs, root, target);
        break;
      }
      case MountOp::Kind::kSealRoot:
        // Not recursive: /tmp, /dev/shm and the workspace stay writable.
        rc = SetAttrs(root, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false);
        break;
      case MountOp::Kind::kBindInRoot: {
        // A file the plan wrote into the root tmpfs, bound over the
        // template's own (which exists: a read-only mount takes mounts on
        // its entries, never new ones), and then taken out of the root.
        int file = open_tree(root, op.source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
        if (file < 0) {
          rc = -errno;
          break;
        }
        rc = SetAttrs(file, op.attrs, false);
        int over = rc == 0 ? OpenBeneath(root, target, /*create=*/false, /*is_file=*/true) : rc;
        if (over < 0) {
          rc = over;
        } else {
          if (move_mount(file, "", over, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) rc = -errno;
          close(over);
        }
        close(file);
        if (rc == 0 && unlinkat(root, op.source.c_str(), 0) != 0) rc = -errno;
        break;
      }
      case MountOp::Kind::kSeal: {
        int dir = OpenBeneath(root, target, /*create=*/false, /*is_file=*/false);
        if (dir < 0) {
          rc = dir;
          break;
        }
        rc = SetAttrs(dir, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false);
        close(dir);
        break;
      }
    }
    if (rc < 0) *failed_op = i;
  }
  close_trees();
  if (rc < 0) {
    close(root);
    return rc;
  }

  // pivot_root(".", "."): the old root ends up stacked under the new one and
  // is detached right away; nothing of the host stays reachable.
  if (fchdir(root) != 0) rc = -errno;
  close(root);
  if (rc == 0 && syscall(SYS_pivot_root, ".", ".") != 0) rc = -errno;
  if (rc == 0 && umount2(".", MNT_DETACH) != 0) rc = -errno;
  if (rc == 0 && chdir("/") != 0) rc = -errno;
  return rc;
}

}  // namespace warden
