#include "admission/tenant_queue.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace warden {
namespace {

// Waits (up to 10 s) until `queue` has `n` requests waiting.
bool AwaitWaiting(const TenantQueue& queue, int n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (queue.Stats().waiting != n) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(TenantQueueTest, QueuesOverTheTenantLimitInsteadOfRefusing) {
  TenantQueue queue({.max_running_per_tenant = 2});
  auto a = queue.Enter("alice", absl::InfiniteFuture());
  auto b = queue.Enter("alice", absl::InfiniteFuture());
  ASSERT_TRUE(a.ok() && b.ok());
  absl::StatusOr<TenantQueue::Slot> third = absl::UnknownError("not yet");
  std::thread waiter([&] { third = queue.Enter("alice", absl::InfiniteFuture()); });
  ASSERT_TRUE(AwaitWaiting(queue, 1));
  EXPECT_EQ(queue.TenantLoad("alice"), std::make_pair(2, 1));
  a->Release();
  waiter.join();
  EXPECT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(queue.TenantLoad("alice"), std::make_pair(2, 0));
  EXPECT_EQ(queue.Stats().queued, 1);
}

// With `holder` running, queues `arrivals` in their order (each waiting
// before the next arrives), then lets the holder go; returns the order in
// which the arrivals were admitted (each leaves at once, admitting the next).
std::vector<std::string> AdmissionOrder(TenantQueue& queue, const std::string& holder,
                                        const std::vector<std::string>& arrivals) {
  auto first = queue.Enter(holder, absl::InfiniteFuture());
  EXPECT_TRUE(first.ok());
  absl::Mutex mu;
  std::vector<std::string> order;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    threads.emplace_back([&, tenant = arrivals[i]] {
      auto slot = queue.Enter(tenant, absl::InfiniteFuture());
      EXPECT_TRUE(slot.ok()) << slot.status();
      absl::MutexLock lock(&mu);
      order.push_back(tenant);
    });
    EXPECT_TRUE(AwaitWaiting(queue, static_cast<int>(i) + 1));
  }
  first->Release();
  for (auto& t : threads) t.join();
  return order;
}

TEST(TenantQueueTest, ServesTenantsInTurnSoABurstCannotStarveASingleRequest) {
  TenantQueue queue({.max_running_per_tenant = 16, .max_running = 1});
  std::vector<std::string> arrivals(20, "alice");
  arrivals.push_back("bob");
  const std::vector<std::string> order = AdmissionOrder(queue, "alice", arrivals);
  ASSERT_EQ(order.size(), 21u);
  // Alice was served last, so the next turn is Bob's, ahead of her 20.
  EXPECT_EQ(order[0], "bob");
  EXPECT_EQ(queue.Stats().running, 0);
  EXPECT_EQ(queue.Stats().waiting, 0);
}

TEST(TenantQueueTest, TenantsAlternateWhileBothWait) {
  TenantQueue queue({.max_running_per_tenant = 16, .max_running = 1});
  EXPECT_EQ(AdmissionOrder(queue, "carol", {"alice", "alice", "alice", "bob", "bob", "bob"}),
            (std::vector<std::string>{"alice", "bob", "alice", "bob", "alice", "bob"}));
}

TEST(TenantQueueTest, OnlyAFullLineIsRefusedAndItSaysWhenToRetry) {
  TenantQueue queue({.max_running_per_tenant = 1, .max_waiting_per_tenant = 1});
  auto running = queue.Enter("alice", absl::InfiniteFuture());
  ASSERT_TRUE(running.ok());
  std::thread waiter([&] { EXPECT_TRUE(queue.Enter("alice", absl::InfiniteFuture()).ok()); });
  ASSERT_TRUE(AwaitWaiting(queue, 1));
  auto refused = queue.Enter("alice", absl::InfiniteFuture());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("retry in about"), std::string::npos) << refused.status();
  // Another tenant's line is its own.
  EXPECT_TRUE(queue.Enter("bob", absl::InfiniteFuture()).ok());
  running->Release();
  waiter.join();
  EXPECT_EQ(queue.Stats().refused, 1);
}

TEST(TenantQueueTest, EachWaiterKeepsItsOwnDeadline) {
  TenantQueue queue({.max_running_per_tenant = 1});
  auto running = queue.Enter("alice", absl::InfiniteFuture());
  ASSERT_TRUE(running.ok());
  absl::StatusOr<TenantQueue::Slot> patient = absl::UnknownError("not yet");
  std::thread waiter([&] { patient = queue.Enter("alice", absl::InfiniteFuture()); });
  ASSERT_TRUE(AwaitWaiting(queue, 1));
  // Long enough for its turn as far as the queue can tell (a turn lasts
  // 100 ms until one has been measured): it waits, and its deadline passes.
  const absl::Time start = absl::Now();
  auto hasty = queue.Enter("alice", start + absl::Milliseconds(400));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400));
  EXPECT_EQ(hasty.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(hasty.status().message().find("did not come before your deadline"), std::string::npos)
      << hasty.status();
  EXPECT_EQ(queue.TenantLoad("alice"), std::make_pair(1, 1));  // the patient one still waits
  running->Release();
  waiter.join();
  EXPECT_TRUE(patient.ok());
  EXPECT_EQ(queue.Stats().timed_out, 1);
  EXPECT_EQ(queue.Stats().too_late, 0);
}

TEST(TenantQueueTest, ARequestItsLineWouldKeepPastItsDeadlineIsRefusedAtOnceSayingWhenToRetry) {
  TenantQueue queue({.max_running_per_tenant = 1});
  // Alice's turns are measured to last about 200 ms.
  for (int i = 0; i < 2; ++i) {
    auto slot = queue.Enter("alice", absl::InfiniteFuture());
    ASSERT_TRUE(slot.ok());
    absl::SleepFor(absl::Milliseconds(200));
  }
  auto holder = queue.Enter("alice", absl::InfiniteFuture());
  ASSERT_TRUE(holder.ok());
  absl::Mutex mu;
  std::vector<TenantQueue::Slot> admitted;
  for (int i = 0; i < 3; ++i) {
    queue.EnterAsync("alice", absl::InfiniteFuture(), [&](absl::StatusOr<TenantQueue::Slot> slot) {
      EXPECT_TRUE(slot.ok()) << slot.status();
      absl::MutexLock lock(&mu);
      if (slot.ok()) admitted.push_back(*std::move(slot));
    });
  }
  // Three ahead of it and one running, at about 200 ms each: 800 ms away,
  // its deadline in 500 ms.
  const absl::Time start = absl::Now();
  auto refused = queue.Enter("alice", start + absl::Milliseconds(500));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(250)) << "refused at once, not at its deadline";
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("3 more wait"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("retry in about"), std::string::npos) << refused.status();
  EXPECT_EQ(queue.Stats().too_late, 1);
  EXPECT_EQ(queue.Stats().waiting, 3);
  // Another tenant's line is its own.
  EXPECT_TRUE(queue.Enter("bob", start + absl::Milliseconds(500)).ok());
  holder->Release();
  for (size_t i = 0; i < 3; ++i) {
    absl::MutexLock lock(&mu);
    auto one = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return admitted.size() > i; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&one), absl::Seconds(10)));
    TenantQueue::Slot done = std::move(admitted[i]);
    mu.Unlock();
    done.Release();  // admits the next, whose callback takes mu
    mu.Lock();
  }
}

TEST(TenantQueueTest, ThousandsWaitWithoutAThreadEachAndAreServedInOrder) {
  TenantQueue queue({.max_running_per_tenant = 1, .max_waiting_per_tenant = 10'000});
  auto running = queue.Enter("alice", absl::InfiniteFuture());
  ASSERT_TRUE(running.ok());
  std::vector<int> order;
  std::vector<TenantQueue::Slot> slots;
  for (int i = 0; i < 5000; ++i) {
    queue.EnterAsync("alice", absl::InfiniteFuture(), [&order, &slots, i](absl::StatusOr<TenantQueue::Slot> slot) {
      ASSERT_TRUE(slot.ok());
      order.push_back(i);  // admitted on the thread that released the turn before
      slots.push_back(*std::move(slot));
    });
  }
  EXPECT_EQ(queue.Stats().waiting, 5000);
  running->Release();
  while (!slots.empty()) {
    TenantQueue::Slot slot = std::move(slots.back());
    slots.pop_back();
    slot.Release();  // admits the next, which pushes its own slot
  }
  ASSERT_EQ(order.size(), 5000u);
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(order[i], i);
  EXPECT_EQ(queue.Stats().waiting, 0);
  EXPECT_EQ(queue.Stats().running, 0);
}

TEST(TenantQueueTest, StopWakesWaitersWithUnavailable) {
  TenantQueue queue({.max_running_per_tenant = 1});
  auto running = queue.Enter("alice", absl::InfiniteFuture());
  absl::StatusOr<TenantQueue::Slot> waiting = absl::UnknownError("not yet");
  std::thread waiter([&] { waiting = queue.Enter("alice", absl::InfiniteFuture()); });
  ASSERT_TRUE(AwaitWaiting(queue, 1));
  queue.Stop();
  waiter.join();
  EXPECT_EQ(waiting.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(queue.Enter("bob", absl::InfiniteFuture()).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace warden
