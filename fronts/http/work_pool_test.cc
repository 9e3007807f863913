// WorkPool: threads on demand up to the bound, work beyond it waits in
// order, idle threads end, Stop runs what is queued.
#include "fronts/http/work_pool.h"

#include <algorithm>
#include <string>
#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace warden::http {
namespace {

TEST(WorkPoolTest, StartsThreadsOnDemandUpToTheBoundAndQueuesTheRestInOrder) {
  WorkPool pool(1, 3, absl::Seconds(30));
  absl::Notification release;
  std::atomic<int> started{0};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pool.Submit([&] {
      ++started;
      release.WaitForNotification();
    }));
  }
  absl::Mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(pool.Submit([&, i] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
    }));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (started < 3 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(started, 3);
  EXPECT_EQ(pool.threads(), 3) << "never more than the bound";
  EXPECT_EQ(pool.queued(), 5);
  release.Notify();
  pool.Stop();  // runs what is queued first
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(pool.Submit([] {})) << "nothing runs after Stop";
}

TEST(WorkPoolTest, WorkWaitingForAThreadRunsInTheOrderItCame) {
  WorkPool pool(1, 1);
  absl::Notification release;
  ASSERT_TRUE(pool.Submit([&] { release.WaitForNotification(); }));
  std::vector<int> order;  // one thread: no lock needed
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool.Submit([&, i] { order.push_back(i); }));
  release.Notify();
  pool.Stop();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(WorkPoolTest, IdleThreadsEndDownToTheMinimum) {
  WorkPool pool(1, 8, absl::Milliseconds(50));
  absl::Notification release;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(pool.Submit([&] { release.WaitForNotification(); }));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (pool.threads() < 8 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(pool.threads(), 8);
  release.Notify();
  while (pool.threads() > 1 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(pool.threads(), 1);
  std::atomic<bool> ran{false};
  ASSERT_TRUE(pool.Submit([&] { ran = true; }));
  pool.Stop();
  EXPECT_TRUE(ran);
}


// One tenant's work holds at most its share of the threads; another
// tenant's work runs at once beside it, not behind its backlog, and
// waiting tenants take turns.
TEST(WorkPoolTest, ATenantHoldsAtMostItsShareAndAnotherTenantsWorkDoesNotWaitBehindIt) {
  WorkPool pool(1, 4, absl::Seconds(30), /*max_per_tenant=*/2);
  absl::Notification release;
  std::atomic<int> greedy_started{0};
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(pool.Submit(
        [&] {
          ++greedy_started;
          release.WaitForNotification();
        },
        "greedy"));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (greedy_started < 2 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  absl::SleepFor(absl::Milliseconds(50));  // room for a third, which must not start
  EXPECT_EQ(greedy_started, 2);
  EXPECT_EQ(pool.running("greedy"), 2);
  absl::Notification other_ran;
  ASSERT_TRUE(pool.Submit([&] { other_ran.Notify(); }, "other"));
  EXPECT_TRUE(other_ran.WaitForNotificationWithTimeout(absl::Seconds(20)))
      << "another tenant's work waited behind the greedy one's backlog";
  release.Notify();
  pool.Stop();
  EXPECT_EQ(greedy_started, 10);
}

TEST(WorkPoolTest, WaitingTenantsTakeTurns) {
  WorkPool pool(1, 1, absl::Seconds(30), 1);
  absl::Notification started, release;
  ASSERT_TRUE(pool.Submit(
      [&] {
        started.Notify();
        release.WaitForNotification();
      },
      "a"));
  started.WaitForNotification();  // taken: a's line is empty again
  std::vector<std::string> order;  // one thread: no lock needed
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.Submit([&] { order.push_back("a"); }, "a"));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.Submit([&] { order.push_back("b"); }, "b"));
  release.Notify();
  pool.Stop();
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "a", "b", "a", "b"}));
}

}  // namespace
}  // namespace warden::http
