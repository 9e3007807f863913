// WorkPool: threads for work that blocks - a handler's synchronous warden.v1
// calls, a kernel channel's queued requests - so that nothing blocks the
// HTTP server's few I/O threads. Threads start when work arrives and none
// is free, up to max_threads; work beyond that waits, in order. A thread
// idle for `idle_exit` ends, down to min_threads, so a burst of long
// streams does not leave its threads behind.
#pragma once

#include <list>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace warden::http {

class WorkPool {
 public:
  WorkPool(int min_threads, int max_threads, absl::Duration idle_exit = absl::Seconds(30));
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;
  ~WorkPool();  // Stop()

  // Runs `work` on a pool thread, now or once one is free. After Stop(),
  // runs nothing (and returns false).
  bool Submit(absl::AnyInvocable<void() &&> work);
  // Lets the queued work run, waits for all of it, and joins the threads.
  // Idempotent.
  void Stop();
  // Waits until no work runs or waits, or `deadline`; says which came first.
  bool WaitIdle(absl::Time deadline) const;

  int threads() const;  // alive now
  int busy() const;     // running work now
  int queued() const;   // waiting for a thread

 private:
  void Loop();
  void JoinFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int min_threads_;
  const int max_threads_;
  const absl::Duration idle_exit_;
  mutable absl::Mutex mu_;
  std::list<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  std::list<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> finished_ ABSL_GUARDED_BY(mu_);  // ended, not yet joined
  int alive_ ABSL_GUARDED_BY(mu_) = 0;
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace warden::http
