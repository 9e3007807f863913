// WorkPool: threads for work that blocks - a handler's synchronous warden.v1
// calls, a kernel channel's queued requests - so that nothing blocks the
// HTTP server's few I/O threads. Threads start when work arrives and none
// is free, up to max_threads; work beyond that waits. A thread idle for
// `idle_exit` ends, down to min_threads, so a burst of long streams does
// not leave its threads behind.
//
// Work is submitted for a tenant (the caller's; "" when it has none). One
// tenant's work runs on at most `max_per_tenant` threads at once; beyond
// that, and whenever every thread is busy, it waits in that tenant's own
// line, in order, and the lines are served in turn: a tenant that floods
// the server with requests that block holds at most its share of the
// threads, and another tenant's request runs after at most one of each
// other waiting tenant's, never behind the whole flood.
#pragma once

#include <deque>
#include <list>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace warden::http {

class WorkPool {
 public:
  // `max_per_tenant` 0: max_threads (no tenant is held below the bound).
  WorkPool(int min_threads, int max_threads, absl::Duration idle_exit = absl::Seconds(30), int max_per_tenant = 0);
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;
  ~WorkPool();  // Stop()

  // Runs `work` on a pool thread, now or once one is free and `tenant` is
  // below its share. After Stop(), runs nothing (and returns false).
  bool Submit(absl::AnyInvocable<void() &&> work, const std::string& tenant = "");
  // Lets the queued work run, waits for all of it, and joins the threads.
  // Idempotent.
  void Stop();
  // Waits until no work runs or waits, or `deadline`; says which came first.
  bool WaitIdle(absl::Time deadline) const;

  int threads() const;  // alive now
  int busy() const;     // running work now
  int queued() const;   // waiting for a thread
  int running(const std::string& tenant) const;  // `tenant`'s work running now

 private:
  using Work = absl::AnyInvocable<void() &&>;
  struct Line {
    std::deque<Work> queue;
    int running = 0;
  };
  void Loop();
  void JoinFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Work some thread may take now: queued, of a tenant below its share.
  int Runnable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the next runnable work, in turn across the tenants' lines.
  bool TakeNext(Work* work, std::string* tenant) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int min_threads_;
  const int max_threads_;
  const absl::Duration idle_exit_;
  const int max_per_tenant_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Line> lines_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> turns_ ABSL_GUARDED_BY(mu_);  // tenants with queued work, next first
  int queued_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> finished_ ABSL_GUARDED_BY(mu_);  // ended, not yet joined
  int alive_ ABSL_GUARDED_BY(mu_) = 0;
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace warden::http
