// SnapshotArchive: a session snapshot as the supervisor holds it - an open
// file it never looks inside (docs/kernel-protocol.md), copied between a
// sandbox's /tmp, the SnapshotStore and a new sandbox by the kernel
// (sendfile), never through a user-space buffer: on these VMs 10 MiB of
// fresh pages cost about 25 ms of page faults (docs/benchmarks.md).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "sandbox/unique_fd.h"

namespace warden {

struct SnapshotArchive {
  // Read with explicit offsets from 0, never through its file position, so
  // one archive can be copied several times. Unlinked already, or the
  // store's file (which stays readable after Delete until this is closed).
  UniqueFd fd;
  int64_t bytes = 0;
};

// Copies `from` (all of its `bytes`) to `to` at `to`'s position.
// RESOURCE_EXHAUSTED when the target filesystem is full, DATA_LOSS when the
// archive turns out shorter than `bytes`.
absl::Status CopyArchive(const SnapshotArchive& from, const UniqueFd& to);

// Closes `fd` soon, on a thread of its own (started on first use). The last
// close of an unlinked 10 MiB archive frees its pages or blocks, which took
// about 25 ms here under load: a fork or a wake should not wait for that.
void CloseLater(UniqueFd fd);

}  // namespace warden
