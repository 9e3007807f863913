// Limits: the resource limits of one sandboxed run. Defaults are safe for
// hostile code (Judge0-like: small, bounded everything).
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace warden {

struct Limits {
  int64_t memory_bytes = 512LL << 20;     // cgroup memory limit, swap excluded
  int64_t pids = 64;                      // cgroup pids.max and RLIMIT_NPROC
  int64_t cpu_ms = 10'000;                // CPU time, all threads and children
  int64_t wall_ms = 10'000;               // wall clock, enforced by the supervisor
  int64_t output_bytes = 1LL << 20;       // captured bytes, each of stdout and stderr
  int64_t tmpfs_bytes = 64LL << 20;       // each of /tmp, /workspace and /dev/shm
  int64_t file_size_bytes = 64LL << 20;   // RLIMIT_FSIZE
  int64_t open_files = 256;               // RLIMIT_NOFILE
  // CPU bandwidth in percent of one core (CFS quota / cpu.max); 100 = one core.
  int64_t cpu_percent = 100;

  // Rejects zero, negative or absurd values with a message naming the field.
  absl::Status Validate() const;
};

}  // namespace warden
