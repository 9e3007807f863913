// WarmPool: ready sessions of one language (kernel started, heavy modules
// imported), so that a one-shot execution or a new session does not wait
// for an interpreter to start. Background threads (one per core) keep
// `size` of them ready; Acquire hands one out (each is used once, by one
// caller) and waits in a bounded queue when the pool is empty, served first
// come, first served. A pool whose starts keep failing says why (Health)
// instead of letting callers wait for a worker that never comes. Disposer
// tears sessions down off the request path.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kernel/session.h"

namespace warden {

// Destroys sessions on threads of its own (one per core): killing a sandbox
// and removing its cgroup takes milliseconds nobody should wait for, and one
// thread alone falls behind a burst of one-shots (the kill waits for the
// kernel to tear the namespaces down).
class Disposer {
 public:
  Disposer();
  ~Disposer();  // disposes of everything still queued
  void Dispose(std::unique_ptr<Session> session);

 private:
  void Loop();
  absl::Mutex mu_;
  std::deque<std::unique_ptr<Session>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

struct WarmPoolStats {
  int ready = 0;
  int waiting = 0;
  int target = 0;                 // workers it keeps ready now, from demand
  double acquire_per_s = 0;       // recent rate of acquisitions
  double capacity_per_s = 0;      // starts per second its fillers sustain (measured)
  int64_t acquired = 0;
  int64_t misses = 0;  // acquisitions that found the pool empty
  int64_t start_failures = 0;
  bool failing = false;  // Health() is not OK
};

// The error a caller gets when `language`'s workers cannot start:
// UNAVAILABLE "python workers cannot start: <why>".
absl::Status WorkersCannotStart(Language language, const absl::Status& why);

class WarmPool {
 public:
  // `executor` is not owned. `size` 0 means: start each session on demand.
  // The pool keeps between `size` and `max_size` ready (at least `size`),
  // as many as the recent acquisitions consume while one worker starts.
  // `on_health_change` (may be empty) runs on a filler thread whenever
  // Health() turns bad or good again.
  WarmPool(Executor& executor, SessionOptions options, int size, int max_size, int max_waiting,
           std::function<void()> on_health_change = nullptr);
  ~WarmPool();

  // Starts the filling thread.
  void Start();
  // Stops filling and drops the ready sessions; Acquire then fails. Idempotent.
  void Stop();
  // A ready session, or RESOURCE_EXHAUSTED when `max_waiting` callers already
  // wait or none is ready by `deadline` (the message says when to retry).
  // While the pool is empty and Health() is bad, and as soon as it turns bad
  // for those waiting, UNAVAILABLE with the reason (WorkersCannotStart).
  absl::StatusOr<std::unique_ptr<Session>> Acquire(absl::Time deadline);
  // OK, or WorkersCannotStart with the last failure once the fillers have
  // failed kFailuresToReport starts in a row; OK again after one succeeds.
  absl::Status Health() const;
  WarmPoolStats Stats() const;
  const SessionOptions& options() const { return options_; }
  int size() const { return size_; }

 private:
  // Failed starts in a row that make the pool unhealthy: one may be bad
  // luck (a kernel slow under load), two with none succeeding between is
  // a pool that cannot start workers.
  static constexpr int kFailuresToReport = 2;
  // How long a grown pool keeps its target after the last acquisition.
  static constexpr absl::Duration kHold = absl::Seconds(2);

  void FillLoop();
  // Workers to keep ready: the acquisitions expected while one starts,
  // twice over, within [size_, max_size_].
  int Target() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double AcquireRate() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Someone waiting for a worker; the filler hands it one in place.
  struct Waiter {
    std::unique_ptr<Session> session;
  };
  absl::Status HealthLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Executor& executor_;
  const SessionOptions options_;
  const int size_;
  const int max_size_;
  const int max_waiting_;
  int fillers_started_ = 0;
  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Session>> ready_ ABSL_GUARDED_BY(mu_);
  std::deque<Waiter*> waiters_ ABSL_GUARDED_BY(mu_);  // oldest first; not owned
  WarmPoolStats stats_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration last_start_ ABSL_GUARDED_BY(mu_) = absl::Milliseconds(100);
  int starting_ ABSL_GUARDED_BY(mu_) = 0;  // kernels the fillers are starting now
  // Acquisitions per second, smoothed over the last few gaps between them.
  double acquire_rate_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_acquire_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int failures_in_a_row_ ABSL_GUARDED_BY(mu_) = 0;  // across fillers; a success resets it
  absl::Status last_failure_ ABSL_GUARDED_BY(mu_);
  const std::function<void()> on_health_change_;
  std::vector<std::thread> fillers_;
};

}  // namespace warden
