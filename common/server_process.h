// What wardend and warden-gateway set for their own process before any
// thread starts: how Abseil's mutexes and glibc's allocator behave in a
// long-running server, and how many descriptors it may hold.
#pragma once

#include <malloc.h>
#include <sys/resource.h>

#include "absl/synchronization/mutex.h"

namespace warden {

inline void ConfigureServerProcess() {
  // Debian's Abseil is built without NDEBUG, so absl::Mutex checks every
  // acquisition against a process-wide lock-order graph under one global
  // lock (measured here: 110-140 ns per nested pair of locks against 20-30
  // without; 2-3% of warden-gateway's CPU per proxied call) and aborts on a
  // suspected cycle. A server keeps serving instead; the tests, which link
  // the same library, keep the check.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Blocks of 1 MiB and more (request bodies, uploads) are mapped for
  // themselves and unmapped when freed. glibc's default threshold rises to
  // 32 MiB as large blocks are freed, after which they stay in the heap:
  // 320 malformed 5 MiB bodies to /mcp left wardend at 105 MiB RSS against
  // 30 MiB with this (the soak's memory growth, docs/benchmarks.md).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // Every HTTP connection is a descriptor: the soft RLIMIT_NOFILE is raised
  // to the hard one, as servers that use epoll do (the soft limit of 1024
  // that shells and systemd give exists for select() alone). From 1024 the
  // HTTP front would hold fewer than 800 connections. Sandboxes set their
  // own limit.
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace warden
