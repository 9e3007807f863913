// Cgroups for sandboxes, v1 and v2 behind one interface.
//
// A CgroupManager owns Warden's subtree inside the cgroup the process already
// runs in (read from /proc/self/cgroup), as a delegated subtree would be in
// production - or, under warden-keeper on cgroup v2, inside the unit's
// cgroup just above it (CgroupOptions::delegated_cgroup); it never creates
// groups elsewhere in a hierarchy and never touches the host's cgroup mounts. Each sandbox gets one Cgroup, which kills
// its processes and removes itself when destroyed. Sandboxes that are to be
// capped and accounted together (a session's interpreters and commands) get
// theirs as children of one parent Cgroup that holds no process itself.
//
// The filesystem is reached through `CgroupOptions::fs_root`, so both backends
// can be unit-tested against a temporary directory laid out like cgroupfs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden {

enum class CgroupVersion { kV1, kV2 };
const char* CgroupVersionName(CgroupVersion v);

struct CgroupLimits {
  int64_t memory_bytes = 0;  // 0 = unlimited; swap is always limited to 0
  int64_t pids = 0;          // 0 = unlimited
  int64_t cpu_percent = 0;   // 0 = unlimited; 100 = one core
};

struct CgroupUsage {
  int64_t cpu_usage_ns = 0;       // cumulative, all tasks (cpuacct.usage / cpu.stat usage_usec)
  int64_t peak_memory_bytes = 0;  // memory.max_usage_in_bytes / memory.peak (0 if unknown)
  int64_t memory_bytes = 0;       // now: memory.usage_in_bytes / memory.current (0 if unknown)
  int64_t oom_kills = 0;          // memory.oom_control oom_kill / memory.events oom_kill
};

// One sandbox's cgroup (in v1: one directory per controller hierarchy).
class Cgroup {
 public:
  virtual ~Cgroup() = default;
  // Moves `pid` (a host pid) into the group.
  virtual absl::Status AddProcess(pid_t pid) = 0;
  virtual absl::StatusOr<CgroupUsage> Usage() const = 0;
  // SIGKILLs every process in the group (v2: cgroup.kill; v1: freeze, kill
  // each task, thaw). Only processes inside this group, which Warden started.
  virtual absl::Status KillAll() = 0;
  // True when no process is left in the group.
  virtual absl::StatusOr<bool> Empty() const = 0;
  // How many processes are in the group (an exiting one leaves it once its
  // memory is gone, before it is reaped).
  virtual absl::StatusOr<int> ProcessCount() const = 0;
  // Freezes every process in the group and its children (they keep their
  // memory and state but get no CPU, as in a paused machine), or thaws
  // them. Returns once the kernel says the group is frozen or thawed.
  virtual absl::Status SetFrozen(bool frozen) {
    return absl::UnimplementedError("this cgroup cannot be frozen");
  }
  // Kills what is left and removes the directories. Idempotent; also run by
  // the destructor of implementations, with errors logged to stderr only.
  virtual absl::Status Destroy() = 0;
  // The directories of this group (for diagnostics and leak tests).
  virtual std::vector<std::string> Paths() const = 0;

  // Creates a group nested in this one, with `limits` of its own beneath
  // this one's, which then hold for all its children together (memory,
  // pids, CPU; usage is reported for them together too). A group with
  // children holds no process itself; on v2 it enables its controllers for
  // them, and an OOM at its limit kills only the task the kernel chose (no
  // group has memory.oom.group: SetLimits says why). Destroy() kills and
  // removes the children first; a child object destroyed later finds its
  // directories gone, which is not an error.
  virtual absl::StatusOr<std::unique_ptr<Cgroup>> CreateChild(absl::string_view name,
                                                              const CgroupLimits& limits) = 0;
  // Whether Reuse can serve another sandbox with this group (v1 only: v2's
  // memory.peak cannot be reset for the next reader).
  virtual bool Reusable() const { return false; }
  // Readies an emptied group for the next sandbox (RecyclePool): fails
  // unless it holds no process, then writes `limits` (0 = unlimited) and
  // resets what Usage() reports - peak memory and CPU to zero, OOM kills
  // counted from here.
  virtual absl::Status Reuse(const CgroupLimits& limits) {
    return absl::UnimplementedError("this cgroup cannot be reused");
  }
};

// How cgroup directories are made and removed, and how the files that shape
// the tree (cgroup.procs, cgroup.subtree_control) are written. The real one
// is mkdir(2), rmdir(2) and write(2) on cgroupfs, where the kernel adds and
// removes the control files, moves processes and enforces cgroup v2's
// no-internal-processes rule; a fake tree in tests substitutes one that
// plays those parts on regular files.
class CgroupDirectoryOps {
 public:
  virtual ~CgroupDirectoryOps() = default;
  // Fails with AlreadyExists if `path` exists, PermissionDenied if the parent
  // is not writable.
  virtual absl::Status MakeDirectory(const std::string& path) = 0;
  // Fails with NotFound if `path` does not exist.
  virtual absl::Status RemoveDirectory(const std::string& path) = 0;
  // Writes `value` to the control file `path` with one write(2) (the
  // default); cgroupfs answers EBUSY where a move or an enable would break
  // the no-internal-processes rule.
  virtual absl::Status WriteControl(const std::string& path, absl::string_view value);
};

struct CgroupOptions {
  // Prefix prepended to every path read or written ("" = the real root).
  // Tests point it at a temporary directory holding a fake cgroup tree.
  std::string fs_root;
  // Where to read the process's mounts and cgroup membership, relative to
  // fs_root. Tests provide their own files.
  std::string mountinfo_path = "/proc/self/mountinfo";
  std::string self_cgroup_path = "/proc/self/cgroup";
  // Name of Warden's subtree under the current cgroup, e.g. "warden-1234".
  // Each manager creates it on Create and removes it on destruction.
  std::string subtree_name;
  // Force a version instead of detecting it (tests; 0 = detect).
  int force_version = 0;
  // cgroup v2 only: the cgroup delegated to Warden, as /proc/self/cgroup
  // names it (e.g. "/system.slice/wardend.service"), when this process runs
  // in a leaf beneath it rather than in it: wardend under warden-keeper,
  // which moved itself (and so its children) into <delegated>/keeper
  // (MoveIntoLeaf). The subtree and this process's own leaf are made in the
  // delegated cgroup. It must be this process's cgroup or an ancestor of it.
  // Empty: this process's own cgroup. Ignored on v1.
  std::string delegated_cgroup;
  // Shared by the manager and every group it creates; nullptr = mkdir/rmdir.
  std::shared_ptr<CgroupDirectoryOps> directory_ops;
};

class CgroupManager {
 public:
  virtual ~CgroupManager() = default;

  // For a supervisor that starts wardend and stays beside it (warden-keeper
  // under systemd's Delegate=yes): on cgroup v2, moves this process from its
  // cgroup C into the leaf C/<leaf_name> (made if missing), so that C holds
  // no process and wardend may enable controllers in it (the cgroup v2
  // no-internal-processes rule). Children forked afterwards start in the
  // leaf. Returns C as /proc/self/cgroup names it, for wardend's
  // `delegated_cgroup`; "" when nothing was moved: cgroup v1 (or no usable
  // v2), or C is the root. Threads other than the caller's must not exist.
  static absl::StatusOr<std::string> MoveIntoLeaf(const CgroupOptions& options,
                                                  absl::string_view leaf_name);

  // Why Create would fail here on the cgroup v2 no-internal-processes rule:
  // this process's cgroup is not the root, lacks controllers for its
  // children, and holds other processes as well (a login shell's session
  // scope). "" when that is not so, or on cgroup v1. No side effects.
  static std::string SharedCgroupProblem(const CgroupOptions& options);

  // Detects the cgroup version (v2 when the unified hierarchy has the memory
  // and pids controllers available to us, else v1 with memory, pids, cpu,
  // cpuacct and freezer), finds the current cgroup, creates the subtree and
  // checks it is writable. Fails with an error that says what to do when it
  // is not (e.g. not delegated).
  static absl::StatusOr<std::unique_ptr<CgroupManager>> Create(const CgroupOptions& options);

  virtual CgroupVersion version() const = 0;
  // Creates a fresh group named `name` under the subtree with `limits`.
  virtual absl::StatusOr<std::unique_ptr<Cgroup>> CreateGroup(absl::string_view name,
                                                              const CgroupLimits& limits) = 0;
  // One line per hierarchy: version, controllers, the subtree path, and
  // whether cgroup.kill / memory.peak are available. On v2 also the
  // delegated cgroup, the controllers delegated to it and the leaf this
  // process moved into. For --check.
  virtual std::string Describe() const = 0;
  // The subtree directories (one per hierarchy in v1).
  virtual std::vector<std::string> SubtreePaths() const = 0;

  // What ReclaimSubtree found and removed.
  struct Reclaimed {
    int processes = 0;                     // SIGKILLed (all were inside the subtree)
    std::vector<std::string> directories;  // removed: groups, then the subtree itself
  };
  // Removes the subtree named `subtree_name` beside this manager's own, left
  // by a wardend that died without cleaning up (kill -9): SIGKILLs every
  // process in its groups (and, on v2, in the leaf that daemon had moved
  // itself into), then removes the groups and the subtree. Only "warden-..."
  // names other than this manager's own are accepted, so nothing but a
  // Warden subtree is ever touched. A subtree that does not exist is not an
  // error: nothing is reclaimed.
  // Groups named in `keep` (sandboxes a successor adopted: docs/keeper-design.md)
  // are left alone, and so is the subtree directory that holds them.
  virtual absl::StatusOr<Reclaimed> ReclaimSubtree(absl::string_view subtree_name,
                                                   const std::set<std::string>& keep = {}) const = 0;
  // The existing group `group_name` in the subtree `subtree_name` beside this
  // manager's own (one a predecessor created, adopted with its sandbox). The
  // Cgroup removes itself when destroyed, like one CreateGroup made.
  virtual absl::StatusOr<std::unique_ptr<Cgroup>> OpenGroup(absl::string_view subtree_name,
                                                            absl::string_view group_name) const = 0;
};

}  // namespace warden
