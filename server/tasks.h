// Tasks: the threads that run the services' blocking work (running code,
// starting kernels, moving files), so that none of it runs on gRPC's
// callback threads. Shared by every service wardend hosts.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace warden {

// Runs blocking work, each piece on a thread of its own, and knows how many
// are still out. Threads that finish wait a while for the next piece before
// they exit, so a busy server does not create a thread per call (about a
// tenth of a trivial cell's round trip on these machines).
class Tasks {
 public:
  Tasks();
  // Tells the idle threads to leave and joins them: once it returns, every
  // thread without work has ended, its thread-local state destroyed (the
  // process may exit: OpenSSL's exit handler frees what gRPC's TLS left in
  // those threads, and must not run beside their own cleanup). Work must
  // have finished (WaitIdle); a thread still running a piece is left to end
  // by itself.
  ~Tasks();

  void Run(std::function<void()> work);
  // Waits until none is running, or the deadline; returns whether idle.
  bool WaitIdle(absl::Time deadline);
  int running() const;

 private:
  // A thread waiting for work; Run hands it over in place.
  struct Idle {
    std::function<void()> work;
    bool stop = false;
  };
  // Shared with the threads; one still running work at ~Tasks outlives it.
  struct State {
    absl::Mutex mu;
    int running ABSL_GUARDED_BY(mu) = 0;
    std::vector<Idle*> idle ABSL_GUARDED_BY(mu);
    bool stopping ABSL_GUARDED_BY(mu) = false;
    // Every thread, by id; one that leaves moves its handle to `finished`,
    // which the next Run or ~Tasks joins.
    int next_id ABSL_GUARDED_BY(mu) = 0;
    std::map<int, std::thread> threads ABSL_GUARDED_BY(mu);
    std::vector<std::thread> finished ABSL_GUARDED_BY(mu);
  };
  static void Loop(std::shared_ptr<State> state, int id, std::function<void()> work);

  std::shared_ptr<State> state_;
};

}  // namespace warden
