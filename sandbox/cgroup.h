// Cgroups for sandboxes, v1 and v2 behind one interface.
//
// A CgroupManager owns Warden's subtree inside the cgroup the process already
// runs in (read from /proc/self/cgroup), as a delegated subtree would be in
// production; it never creates groups elsewhere in a hierarchy and never
// touches the host's cgroup mounts. Each sandbox gets one Cgroup, which kills
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
  // them and an OOM at its limit kills only the child the kernel chose
  // (each child has memory.oom.group, the parent not). Destroy() kills and
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

// How cgroup directories are made and removed. The real one is mkdir(2) and
// rmdir(2) on cgroupfs, where the kernel adds and removes the control files;
// a fake tree in tests substitutes one that creates them as regular files.
class CgroupDirectoryOps {
 public:
  virtual ~CgroupDirectoryOps() = default;
  // Fails with AlreadyExists if `path` exists, PermissionDenied if the parent
  // is not writable.
  virtual absl::Status MakeDirectory(const std::string& path) = 0;
  // Fails with NotFound if `path` does not exist.
  virtual absl::Status RemoveDirectory(const std::string& path) = 0;
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
  // Shared by the manager and every group it creates; nullptr = mkdir/rmdir.
  std::shared_ptr<CgroupDirectoryOps> directory_ops;
};

class CgroupManager {
 public:
  virtual ~CgroupManager() = default;

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
  // whether cgroup.kill / memory.peak are available. For --check.
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
