// MountPlan: the sandbox's root filesystem, decided in the supervisor and
// applied inside the child.
//
// BuildMountPlan validates a FilesystemSpec and turns it into a flat list of
// operations with every string and number prepared, so that ApplyMountPlan,
// which runs in a freshly cloned child of a possibly multi-threaded process,
// makes only system calls: no allocation, no locks, no libc state.
// OpenBindSources, run by the supervisor, opens the host side of every bind
// beforehand, so that the child needs no access to the host's paths.
//
// The layout: a fresh tmpfs root (read-only once built); read-only, nosuid,
// nodev binds of the runtime trees (host symlinks such as /lib -> usr/lib are
// copied as symlinks); a generated /etc plus a few read-only host /etc files
// the runtimes need; a fresh /proc (hidepid=invisible); a minimal /dev with
// null, zero, full, random, urandom and a private /dev/shm; /tmp and the
// workspace as size-limited tmpfs (or the workspace as a writable host bind);
// extra read-only or writable binds. Nothing else of the host is visible.
//
// With a template (FilesystemSpec::root: an image's root filesystem from the
// image store) the runtime trees are the template's own top-level entries,
// bound the same way, and /etc is the template's, bound whole, with Warden's
// generated files bound over its own. A mount target that lies in one of
// the template's directories but does not exist there (a volume at
// /mnt/data) gets a read-only tmpfs over that directory holding binds of
// its entries and the new mount point ("splitting" it), so nothing is ever
// written into the template.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sandbox/unique_fd.h"

namespace warden {

// The most operations a plan may hold (BuildMountPlan refuses more): the
// child keeps one array slot per operation on its stack.
inline constexpr int kMaxMountOps = 128;

struct BindMount {
  std::string source;  // absolute host path (with source_fd: what it is, for messages)
  std::string target;  // absolute path inside the sandbox
  bool writable = false;
  // A detached mount or directory of the supervisor's (not owned; e.g. a
  // volume's file system) to bind instead of the host path `source`.
  int source_fd = -1;
  // Seen through an idmapped mount (mount_setattr(2), MOUNT_ATTR_IDMAP) with
  // the sandbox's own user namespace: files owned by uid/gid N on disk are
  // owned by the sandbox's N, and what the sandbox user creates is N's on
  // disk, whichever host ids this sandbox runs as. kRequired fails the
  // sandbox where the file system cannot do it; kPreferred shows the files
  // unmapped then (as nobody), as without it.
  enum class Idmap { kNone, kPreferred, kRequired } idmap = Idmap::kNone;
};

struct FilesystemSpec {
  // Host trees bound read-only at the same path (symlinks copied as symlinks;
  // missing ones skipped).
  std::vector<std::string> runtime_paths = {"/usr", "/lib", "/lib64", "/bin", "/sbin"};
  // Host /etc entries bound read-only if they exist: what the dynamic linker,
  // Debian's alternatives, Python, matplotlib, R (Renviron: its defaults) and
  // the JDK (jvm.cfg, its security defaults) read.
  std::vector<std::string> host_etc_entries = {
      "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime",
      "matplotlibrc", "mime.types", "protocols", "services", "python3", "python3.11", "fonts",
      "R", "java-17-openjdk"};
  std::vector<BindMount> binds;  // extra binds, applied after everything else
  std::string workspace = "/workspace";
  // When set, this host directory is bound writable as the workspace instead
  // of a fresh tmpfs (sessions keep files across restarts this way).
  std::string workspace_source;
  int64_t tmpfs_bytes = 64LL << 20;  // size of each of /tmp, /dev/shm and the workspace tmpfs
  uid_t sandbox_uid = 1000;  // inside the user namespace
  gid_t sandbox_gid = 1000;
  std::string user_name = "sandbox";
  std::string hostname = "sandbox";
  // Terminals: a devpts of the sandbox's own at /dev/pts (at most
  // kMaxTerminals of them at once), /dev/ptmx and the host's /dev/tty node
  // (which opens the caller's own controlling terminal, nothing else).
  bool terminals = false;
  // A host file bound read-only over /proc/sys/kernel/random/boot_id (a
  // machine's own, kernel/boot_id.h); empty: the host's shows through.
  std::string boot_id_source;
  // A host file bound read-only at /etc/ssl/certs/ca-certificates.crt, the
  // CA bundle every TLS client in the sandbox trusts (OpenSSL's default,
  // certifi's on Debian): the public CAs plus the egress proxy's own, so
  // that it is the sandbox's alone and never the host's. Empty: none.
  std::string ca_bundle_source;
  // More paths in the root, made after everything else: empty directories
  // (the init's, readable by all), and symlinks (path -> link text), e.g. a
  // second name for the workspace.
  std::vector<std::string> dirs;
  std::vector<std::pair<std::string, std::string>> links;

  // A template's root filesystem, a host directory (the image store's, never
  // written), instead of the host's runtime trees: runtime_paths and
  // host_etc_entries are then unused. Its files are seen through idmapped
  // binds (BindMount::Idmap::kPreferred). `passwd_base` and `group_base` are
  // its own /etc/passwd and /etc/group, kept in the generated ones but for
  // any line of the sandbox user's uid or name.
  std::string root;
  std::string passwd_base, group_base;
};

// Where FilesystemSpec::ca_bundle_source is bound in the sandbox.
inline constexpr char kSandboxCaBundle[] = "/etc/ssl/certs/ca-certificates.crt";

// How many terminals one sandbox's devpts holds at once.
inline constexpr int kMaxTerminals = 64;

struct MountOp {
  enum class Kind {
    kDir,        // mkdir target (0755, like every mount point)
    kSymlink,    // target -> source (link text)
    kFile,       // write `contents` to target (mode 0644)
    kBind,       // bind host `source` recursively at target with `attrs`
    kTmpfs,      // tmpfs at target: size_bytes, mode, uid, gid, attrs
    kProc,       // proc at target, hidepid=invisible
    kDevpts,     // a new devpts instance at target (FilesystemSpec::terminals)
    kSealRoot,   // make the root tmpfs read-only (after everything is in place)
    // A file `source` of the new root (a kFile's) bound over `target`, and
    // then removed from the root: Warden's /etc files over a template's.
    kBindInRoot,
    kSeal,       // make the tmpfs at `target` read-only (a split directory's)
  };
  Kind kind = Kind::kDir;
  std::string target;    // relative to the new root, no leading '/'
  std::string source;    // kBind: host path; kSymlink: link text
  std::string contents;  // kFile
  bool target_is_file = false;  // kBind of a regular or device file
  uint64_t attrs = 0;           // MOUNT_ATTR_* set on the mount
  int64_t size_bytes = 0;       // kTmpfs
  mode_t mode = 0755;           // kTmpfs
  uid_t uid = 0;                // kTmpfs owner inside the user namespace; 0 = the init
  gid_t gid = 0;
  // Pre-formatted fsconfig values, so the child formats nothing (uid_text and
  // gid_text are empty for the default owner).
  std::string size_text, mode_text, uid_text, gid_text;
  BindMount::Idmap idmap = BindMount::Idmap::kNone;  // kBind
  // kBind: the supervisor's fd of the source (BindMount::source_fd; not
  // owned, never sent to a fork server); -1: the host path `source`.
  int source_fd = -1;
};

struct MountPlan {
  std::vector<MountOp> ops;
  int64_t root_size_bytes = 8LL << 20;
  // Every path of the layout, as "/usr", for diagnostics and tests.
  std::vector<std::string> Describe() const;
};

absl::StatusOr<MountPlan> BuildMountPlan(const FilesystemSpec& spec);

// Checks that `path` is absolute, normalised (no "." or ".." components, no
// "//", no trailing '/') and not "/". Used for every configured target.
absl::Status ValidateSandboxPath(const std::string& path);

// The host side of the plan's binds, opened by the supervisor (real root in
// the host's namespaces): one detached, recursive copy of each kBind source
// (open_tree(OPEN_TREE_CLONE)), in plan order, with the operation's
// attributes (read-only, nosuid, nodev) already set and its propagation
// private. The sandbox's init attaches them with move_mount and so never
// resolves a host path itself: a source stays reachable whatever the modes
// of its parent directories (a checkout under a 0700 home), while the
// sandbox's own ids still need the source's own permissions to read it.
// Needs CAP_SYS_ADMIN in the host's mount namespace; a rootless supervisor
// leaves the opening to the child (ApplyMountPlan with no trees).
absl::StatusOr<std::vector<UniqueFd>> OpenBindSources(const MountPlan& plan);

// Once the sandbox's id maps are written: idmaps each of OpenBindSources'
// trees whose operation asks for it (BindMount::Idmap) with the sandbox's
// user namespace `userns_fd`, before the sandbox attaches them.
absl::Status IdmapBindSources(const MountPlan& plan, const std::vector<UniqueFd>& trees, int userns_fd);
// True if some bind of the plan asks to be idmapped.
bool NeedsIdmap(const MountPlan& plan);

// Applies the plan in the current (new) mount namespace and pivots into the
// result: mounts are made private, the new root is built at `staging_dir`
// (an existing directory, e.g. "/tmp"; shadowing it is harmless because every
// bind source is opened before), pivot_root, and the old root is detached.
// `bind_trees` holds OpenBindSources' `n_bind_trees` fds (one per kBind
// operation, in plan order; all of them are closed here), or is null: then
// the child opens each source by its host path, with its own credentials.
// Async-signal-safe. Returns 0, or -errno with *failed_op set to the index of
// the operation that failed (-1 for the root and pivot steps).
int ApplyMountPlan(const MountPlan& plan, const int* bind_trees, int n_bind_trees,
                   const char* staging_dir, int* failed_op);

}  // namespace warden
