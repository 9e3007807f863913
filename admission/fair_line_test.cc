#include "admission/fair_line.h"

#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "admission/service_time.h"
#include "gtest/gtest.h"

namespace warden {
namespace {

// Each waiter's callback says who it was.
using Line = FairLine<std::string>;

std::vector<std::string> Drain(Line& line) {
  std::vector<std::string> order;
  while (std::optional<Line::Taken> next = line.Pop()) order.push_back(next->callback);
  return order;
}

const absl::Time kNow = absl::FromUnixSeconds(1'000'000);

TEST(FairLineTest, ServesEachTenantInOrderAndTenantsInTurn) {
  Line line(100);
  for (const char* name : {"a1", "a2", "a3", "a4"}) line.Push("alice", absl::InfiniteFuture(), kNow, name);
  for (const char* name : {"b1", "b2"}) line.Push("bob", absl::InfiniteFuture(), kNow, name);
  line.Push("carol", absl::InfiniteFuture(), kNow, "c1");
  EXPECT_EQ(line.size(), 7);
  EXPECT_EQ(Drain(line), (std::vector<std::string>{"a1", "b1", "c1", "a2", "b2", "a3", "a4"}));
  EXPECT_TRUE(line.empty());
}

TEST(FairLineTest, ABurstDelaysAnotherTenantByOneTurnNotByTheBurst) {
  Line line(10'000);
  for (int i = 0; i < 1000; ++i) line.Push("alice", absl::InfiniteFuture(), kNow, "alice");
  // Bob's request would be served after at most one of alice's.
  EXPECT_LE(line.Ahead("bob"), 1);
  line.Push("bob", absl::InfiniteFuture(), kNow, "bob");
  EXPECT_EQ(line.Pop()->callback, "alice");
  EXPECT_EQ(line.Pop()->callback, "bob");
  // Alice's next request is behind her own thousand.
  EXPECT_EQ(line.Ahead("alice"), 999);
}

TEST(FairLineTest, TheTurnMovesOnFromWhoeverWasServedLast) {
  Line line(100);
  line.Served("bob");  // bob went first without waiting
  line.Push("alice", absl::InfiniteFuture(), kNow, "a");
  line.Push("bob", absl::InfiniteFuture(), kNow, "b");
  line.Push("carol", absl::InfiniteFuture(), kNow, "c");
  EXPECT_EQ(Drain(line), (std::vector<std::string>{"c", "a", "b"}));
}

TEST(FairLineTest, FirstGoesAheadOfItsOwnTenantOnly) {
  Line line(100);
  line.Push("alice", absl::InfiniteFuture(), kNow, "a1");
  line.Push("alice", absl::InfiniteFuture(), kNow, "a2");
  line.Push("alice", absl::InfiniteFuture(), kNow, "wake", /*first=*/true);
  EXPECT_EQ(Drain(line), (std::vector<std::string>{"wake", "a1", "a2"}));
}

TEST(FairLineTest, PopSkipsTenantsThatMayNotBeServed) {
  Line line(100);
  line.Push("alice", absl::InfiniteFuture(), kNow, "a");
  line.Push("bob", absl::InfiniteFuture(), kNow, "b");
  auto not_alice = [](const std::string& tenant) { return tenant != "alice"; };
  EXPECT_EQ(line.Pop(not_alice)->callback, "b");
  EXPECT_FALSE(line.Pop(not_alice).has_value());
  EXPECT_EQ(line.size(), 1);
  EXPECT_EQ(line.Pop()->callback, "a");
}

TEST(FairLineTest, ExpiresOnlyWaitersPastTheirOwnDeadlineEarliestFirst) {
  Line line(100);
  line.Push("alice", kNow + absl::Seconds(5), kNow, "late");
  line.Push("alice", absl::InfiniteFuture(), kNow, "patient");
  line.Push("bob", kNow + absl::Seconds(1), kNow, "early");
  line.Push("bob", kNow + absl::Seconds(1), kNow, "early too");
  EXPECT_EQ(line.NextDeadline(), kNow + absl::Seconds(1));
  EXPECT_TRUE(line.Expire(kNow).empty());
  std::vector<Line::Taken> expired = line.Expire(kNow + absl::Seconds(2));
  ASSERT_EQ(expired.size(), 2u);
  EXPECT_EQ(expired[0].tenant, "bob");
  EXPECT_EQ(expired[0].since, kNow);
  EXPECT_EQ(line.NextDeadline(), kNow + absl::Seconds(5));
  EXPECT_EQ(line.waiting("bob"), 0);
  expired = line.Expire(kNow + absl::Hours(1000));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].callback, "late");
  EXPECT_EQ(line.NextDeadline(), absl::InfiniteFuture());
  EXPECT_EQ(Drain(line), (std::vector<std::string>{"patient"}));
}

TEST(FairLineTest, AServedWaiterLeavesTheDeadlineIndexToo) {
  Line line(100);
  line.Push("alice", kNow + absl::Seconds(1), kNow, "a");
  line.Push("alice", kNow + absl::Seconds(1), kNow, "b");
  EXPECT_EQ(line.Pop()->callback, "a");
  std::vector<Line::Taken> expired = line.Expire(kNow + absl::Seconds(1));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].callback, "b");
  EXPECT_TRUE(line.empty());
}

TEST(FairLineTest, IsFullAtItsBound) {
  Line line(2);
  line.Push("alice", absl::InfiniteFuture(), kNow, "a");
  EXPECT_FALSE(line.full());
  line.Push("bob", absl::InfiniteFuture(), kNow, "b");
  EXPECT_TRUE(line.full());
  EXPECT_EQ(line.TakeAll().size(), 2u);
  EXPECT_FALSE(line.full());
}

TEST(FairLineTest, HoldsMoveOnlyCallbacks) {
  FairLine<absl::AnyInvocable<int() &&>> line(10);
  auto owned = std::make_unique<int>(42);
  line.Push("alice", absl::InfiniteFuture(), kNow, [owned = std::move(owned)]() mutable { return *owned; });
  EXPECT_EQ(std::move(line.Pop()->callback)(), 42);
}

TEST(ServiceTimeTest, ALineOfNTakesNMeansOverItsServers) {
  ServiceTime time(absl::Milliseconds(100));
  EXPECT_FALSE(time.measured());
  EXPECT_EQ(time.For(10, 2), absl::Milliseconds(500));
  time.Record(absl::Milliseconds(40));  // the first measure replaces the guess
  EXPECT_EQ(time.mean(), absl::Milliseconds(40));
  time.Record(absl::Milliseconds(140));
  EXPECT_EQ(time.mean(), absl::Milliseconds(60));
  EXPECT_DOUBLE_EQ(ServiceTime(absl::Milliseconds(50)).PerSecond(2), 40);
  EXPECT_EQ(RetryMs(absl::Microseconds(10)), 1);
  EXPECT_EQ(RetryMs(absl::Milliseconds(-5)), 1);
  EXPECT_EQ(Spoken(absl::Milliseconds(340)), "340 ms");
  EXPECT_EQ(Spoken(absl::Seconds(12.5)), "12.5 s");
}

}  // namespace
}  // namespace warden
