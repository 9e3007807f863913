// SharedWorkspace: one workspace directory for several sandboxes - a
// session's interpreters ("contexts") and the commands run beside them - so
// a file one of them writes is there for the others.
//
// The directory lives on the host, beneath `parent`, as a size-limited tmpfs
// of its own when wardend may mount one (as root), else as a plain
// directory (its size is then bounded only by the host's disk; the daemon
// logs that). It belongs to the host ids of one identity slot, which every
// sandbox binding it runs as (SpawnOptions::identity_slot): files written by
// one are the others' to change. Destroying it unmounts and removes it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "sandbox/sandbox.h"

namespace warden {

class SharedWorkspace {
 public:
  // `executor` is not owned; it hands out the identity slot.
  static absl::StatusOr<std::unique_ptr<SharedWorkspace>> Create(Executor& executor,
                                                                 const std::string& parent,
                                                                 int64_t max_bytes);
  ~SharedWorkspace();
  SharedWorkspace(const SharedWorkspace&) = delete;
  SharedWorkspace& operator=(const SharedWorkspace&) = delete;

  const std::string& path() const { return path_; }
  uint64_t identity_slot() const { return slot_; }
  bool size_limited() const { return mounted_; }
  struct DiskUsage {
    int64_t used_bytes = 0;
    int64_t limit_bytes = 0;
  };
  // What its files take of its tmpfs (statvfs); NotFound without one of its own.
  absl::StatusOr<DiskUsage> Disk() const;

  // The default parent: a directory of wardend's own under the system's
  // temporary directory.
  static std::string DefaultParent();

 private:
  SharedWorkspace() = default;

  std::string path_;
  uint64_t slot_ = 0;
  bool mounted_ = false;
};

}  // namespace warden
