// StateDir: wardend's claim on its state directory (/run/warden by default),
// and the record a successor needs to clean up after a crash.
//
// Claim() takes an exclusive flock(2) on <dir>/wardend.lock, so a second
// wardend given the same directory refuses to start while the first lives;
// the kernel drops the lock when its holder dies, however it dies. Beside
// the lock, <dir>/wardend.state records what this daemon made that outlives
// its memory - its cgroup subtree, its helper processes, its UNIX sockets -
// so that a daemon started after a kill -9 reclaims exactly that (Reclaim)
// and never anything else. A clean shutdown removes the record; the lock
// file stays, empty (unlinking it would let two daemons lock two files).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sandbox/cgroup.h"
#include "sandbox/unique_fd.h"

namespace warden {

// One process named for good: a pid alone may be recycled, a pid with its
// start time may not.
struct ProcessRecord {
  pid_t pid = 0;
  uint64_t start_time = 0;  // field 22 of /proc/PID/stat, clock ticks after boot
  std::string what;         // e.g. "python zygote", for the reclaim report
};

struct StateRecord {
  pid_t daemon_pid = 0;
  std::string cgroup_subtree;           // its name; empty in degraded mode
  // Predecessors' subtrees still holding sandboxes this daemon adopted
  // (docs/keeper-design.md); reclaimed like its own after a crash.
  std::vector<std::string> held_subtrees;
  std::vector<ProcessRecord> processes;  // helpers started outside any sandbox cgroup
  std::vector<std::string> sockets;      // UNIX sockets it listens on

  // A line-based text form ("key value"), versioned.
  std::string Encode() const;
  static absl::StatusOr<StateRecord> Decode(const std::string& text);
};

class StateDir {
 public:
  // Creates `dir` if needed (0755: it also holds the API socket) and locks
  // it. FAILED_PRECONDITION naming the owner's pid when another live
  // wardend holds it.
  static absl::StatusOr<std::unique_ptr<StateDir>> Claim(const std::string& dir);
  ~StateDir();

  const std::string& dir() const { return dir_; }
  // The record a previous daemon left behind by not shutting down: it
  // crashed or was killed, and what it names must be reclaimed.
  const std::optional<StateRecord>& previous() const { return previous_; }
  // Replaces the record, atomically (a crash mid-write leaves the old one).
  absl::Status Write(const StateRecord& record);
  // Removes this daemon's record (once Write has been called): a clean
  // shutdown left nothing to reclaim. A previous daemon's record stays
  // until this one has replaced it.
  void RemoveRecord();

 private:
  StateDir() = default;
  std::string record_path() const;

  std::string dir_;
  UniqueFd lock_;
  std::optional<StateRecord> previous_;
  bool wrote_ = false;
};

// The start time of `pid` (see ProcessRecord); NOT_FOUND once it is gone.
absl::StatusOr<uint64_t> ProcessStartTime(pid_t pid);

// What Reclaim found and removed, for the log.
struct ReclaimReport {
  pid_t dead_daemon = 0;
  int processes = 0;
  std::vector<std::string> cgroups;  // directories removed
  std::vector<std::string> files;    // files removed
  std::vector<std::string> problems;  // what could not be reclaimed, and why
  std::string Summary() const;
};

// Reclaims what `previous` names: SIGKILLs its recorded helpers that are
// still the same processes, removes its cgroup subtree beside `cgroups`'
// own (killing whatever is still inside: only Warden's sandboxes live
// there), and removes its sockets from the state directory. Mounts need no
// reclaiming: every mount Warden makes is inside a sandbox's own mount
// namespace, which the kernel tears down with the sandbox's last process.
// `cgroups` may be null (degraded mode).
// `keep` names, by subtree, the groups of sandboxes being adopted from the
// keeper: those and their subtree stay.
ReclaimReport Reclaim(const StateRecord& previous, const CgroupManager* cgroups,
                      const std::map<std::string, std::set<std::string>>& keep = {});

// Replaces `path` with `text` atomically (a temporary file, fsync, rename),
// mode 0600.
absl::Status WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace warden
