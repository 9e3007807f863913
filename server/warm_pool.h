// WarmPool: ready sessions of one language (kernel started, heavy modules
// imported), so that a one-shot execution or a new session does not wait
// for an interpreter to start. Background threads (one per core) keep
// `size` of them ready; Acquire hands one out (each is used once, by one
// caller). When none is ready, requests wait in a fair line without a
// thread each, and the fillers hand each the next worker they start: a
// burst is served at the rate the fillers start workers, in order, and only
// a request that could not be served before its deadline is refused. A pool
// whose starts keep failing says why (Health) instead of letting callers
// wait for a worker that never comes. Disposer tears sessions down off the
// request path.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "admission/fair_line.h"
#include "admission/service_time.h"
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
  // Refused at once: the line full (queue.max_depth), or too long to be
  // served before the caller's deadline at capacity_per_s.
  int64_t refused_full = 0;
  int64_t refused_late = 0;
  int64_t timed_out = 0;  // their deadline came while they waited
  bool failing = false;  // Health() is not OK
};

// The error a caller gets when `language`'s workers cannot start:
// UNAVAILABLE "python workers cannot start: <why>".
absl::Status WorkersCannotStart(Language language, const absl::Status& why);

class WarmPool {
 public:
  using Handed = absl::AnyInvocable<void(absl::StatusOr<std::unique_ptr<Session>>) &&>;

  // `executor` is not owned. The pool keeps between `size` and `max_size`
  // ready (at least `size`), as many as the recent acquisitions consume
  // while one worker starts; `size` 0 keeps none ready, and its fillers
  // start one for each request waiting. At most `max_waiting` requests
  // wait, all tenants together. `on_health_change` (may be empty) runs on
  // a filler thread whenever Health() turns bad or good again.
  WarmPool(Executor& executor, SessionOptions options, int size, int max_size, int max_waiting,
           std::function<void()> on_health_change = nullptr);
  ~WarmPool();

  // Starts the fillers (one per core) and the thread that refuses waiters
  // at their deadlines.
  void Start();
  // Stops filling, refuses the waiters (UNAVAILABLE) and drops the ready
  // sessions; Acquire then fails. Idempotent.
  void Stop();
  // A ready session for `tenant`, now or once a filler has started one for
  // it: `handed` is called once, with the session or why there is none.
  // Requests wait in a FairLine (admission/fair_line.h): first come, first
  // served within a tenant, tenants in turn, no thread held. Refused with
  // RESOURCE_EXHAUSTED, saying when to retry: at once when `max_waiting`
  // already wait or when the requests ahead would keep it waiting past
  // `deadline` at the rate the fillers start workers (measured); at
  // `deadline` if none came by then. UNAVAILABLE (WorkersCannotStart) when
  // the pool cannot start workers, at once or as soon as that is clear.
  // `first`: before the tenant's other requests (a session waking up for a
  // call). `handed` runs on this thread when the answer is immediate, else
  // on a filler's or the deadline thread: it must not block.
  void AcquireAsync(const std::string& tenant, absl::Time deadline, Handed handed, bool first = false);
  // The same, waiting on this thread.
  absl::StatusOr<std::unique_ptr<Session>> Acquire(const std::string& tenant, absl::Time deadline,
                                                   bool first = false);
  // A session acquired but not used (its caller went away): to the next
  // waiter, or ready again.
  void GiveBack(std::unique_ptr<Session> session);
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
  using Line = FairLine<Handed>;
  struct Handoff {
    Handed handed;
    absl::StatusOr<std::unique_ptr<Session>> result;
  };

  void FillLoop();
  // Refuses waiters whose deadline passed, until Stop.
  void ExpireLoop();
  // Workers to keep ready: the acquisitions expected while one starts,
  // twice over, within [size_, max_size_].
  int Target() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double AcquireRate() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A ready session that is still alive, or null.
  std::unique_ptr<Session> TakeReady() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why `tenant` is refused now, or OK to wait until `deadline`.
  absl::Status Admit(const std::string& tenant, absl::Time deadline, absl::Time now, bool first)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HealthLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int Fillers() const { return fillers_started_ > 0 ? fillers_started_ : 1; }
  static void Deliver(std::vector<Handoff> handoffs);

  Executor& executor_;
  const SessionOptions options_;
  const int size_;
  const int max_size_;
  const int max_fillers_;
  int fillers_started_ = 0;
  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Session>> ready_ ABSL_GUARDED_BY(mu_);
  Line line_ ABSL_GUARDED_BY(mu_);
  WarmPoolStats stats_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // How long a worker takes to start, lately (the fillers' throughput).
  ServiceTime start_time_ ABSL_GUARDED_BY(mu_){absl::Milliseconds(100)};
  int starting_ ABSL_GUARDED_BY(mu_) = 0;  // kernels the fillers are starting now
  // Acquisitions per second, smoothed over the last few gaps between them.
  double acquire_rate_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_acquire_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int failures_in_a_row_ ABSL_GUARDED_BY(mu_) = 0;  // across fillers; a success resets it
  absl::Status last_failure_ ABSL_GUARDED_BY(mu_);
  const std::function<void()> on_health_change_;
  std::vector<std::thread> fillers_;
  std::thread expirer_;
};

}  // namespace warden
