// Tasks: threads are reused, work never queues behind a busy thread, and
// ~Tasks leaves no idle thread behind.
#include "server/tasks.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace warden {
namespace {

TEST(TasksTest, ReusesIdleThreadsAndNeverQueuesBehindBusyOnes) {
  Tasks tasks;
  // Sequential work runs on the thread the previous piece left idle.
  std::thread::id first, second;
  absl::Notification one, two;
  tasks.Run([&] { first = std::this_thread::get_id(); one.Notify(); });
  one.WaitForNotification();
  ASSERT_TRUE(tasks.WaitIdle(absl::Now() + absl::Seconds(10)));
  tasks.Run([&] { second = std::this_thread::get_id(); two.Notify(); });
  two.WaitForNotification();
  EXPECT_EQ(first, second);
  // Work never waits for a busy thread: the blocked piece is released only
  // by the one started after it.
  absl::Notification release, released;
  tasks.Run([&] {
    release.WaitForNotification();
    released.Notify();
  });
  tasks.Run([&] { release.Notify(); });
  EXPECT_TRUE(released.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(tasks.WaitIdle(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(tasks.running(), 0);
}

// What a thread's thread-local state does when the thread ends (OpenSSL's,
// which gRPC's TLS leaves in the threads that send its frames, frees itself
// this way; so must every thread end before the process's exit handlers).
struct ThreadEnd {
  static inline std::atomic<int> ended{0};
  bool touched = false;
  ~ThreadEnd() {
    if (touched) ++ended;
  }
};
thread_local ThreadEnd thread_end;

TEST(TasksTest, ItsEndJoinsEveryIdleThreadWithItsThreadLocalState) {
  constexpr int kThreads = 6;
  ThreadEnd::ended = 0;
  {
    Tasks tasks;
    absl::Mutex mu;
    int started = 0;
    for (int i = 0; i < kThreads; ++i) {
      tasks.Run([&] {
        thread_end.touched = true;
        absl::MutexLock lock(&mu);
        ++started;
        // All at once: each piece on a thread of its own.
        mu.Await(absl::Condition(+[](int* n) { return *n == kThreads; }, &started));
      });
    }
    ASSERT_TRUE(tasks.WaitIdle(absl::Now() + absl::Seconds(30)));
    EXPECT_EQ(ThreadEnd::ended, 0) << "the threads wait for more work";
  }
  EXPECT_EQ(ThreadEnd::ended, kThreads) << "every thread has ended when ~Tasks returns";
}

}  // namespace
}  // namespace warden
