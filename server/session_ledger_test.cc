// The shared ledger's fence: of two nodes claiming the same generation
// exactly one wins; what it reads is the newest; ids are never paths.
#include "server/session_ledger.h"

#include <stdlib.h>

#include <filesystem>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace warden {
namespace {

constexpr char kId[] = "s-0123456789abcdef01234567-node-a";

class SessionLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/ledger_test.XXXXXX";
    dir_ = mkdtemp(pattern.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static LedgerRecord Owned(const std::string& node) {
    return LedgerRecord{.state = LedgerRecord::State::kOwned, .node = node, .epoch = "e", .tenant = "alice"};
  }
  std::string dir_;
};

TEST_F(SessionLedgerTest, ASessionThatNeverMovedHasNoEntry) {
  SessionLedger ledger(dir_ + "/sessions");
  auto current = ledger.Current(kId);
  ASSERT_TRUE(current.ok()) << current.status();
  EXPECT_FALSE(current->has_value());
}

TEST_F(SessionLedgerTest, EachGenerationIsClaimedOnceAndTheNewestIsRead) {
  SessionLedger ledger(dir_ + "/sessions");
  LedgerRecord handed{.state = LedgerRecord::State::kHandedOver, .node = "node-a", .tenant = "alice",
                      .snapshot_id = "snap-0123456789abcdef01234567"};
  ASSERT_TRUE(ledger.Append(kId, 0, handed).ok());
  // A node that knows only generation 0 is fenced.
  auto stale = ledger.Append(kId, 0, Owned("node-a"));
  EXPECT_TRUE(absl::IsAborted(stale.status())) << stale.status();
  auto taken = ledger.Append(kId, 1, Owned("node-b"));
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->generation, 2);
  auto current = ledger.Current(kId);
  ASSERT_TRUE(current.ok() && current->has_value());
  EXPECT_EQ((*current)->generation, 2);
  EXPECT_EQ((*current)->node, "node-b");
  EXPECT_EQ((*current)->state, LedgerRecord::State::kOwned);
  ledger.Forget(kId);
  EXPECT_FALSE(ledger.Current(kId)->has_value());
}

TEST_F(SessionLedgerTest, OfManyNodesClaimingAtOnceExactlyOneWins) {
  SessionLedger ledger(dir_ + "/sessions");
  std::vector<std::thread> threads;
  std::atomic<int> won{0}, fenced{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = ledger.Append(kId, 0, Owned("node-" + std::to_string(i)));
      ++(r.ok() ? won : fenced);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(fenced.load(), 7);
}

TEST_F(SessionLedgerTest, IdsAreNeverPaths) {
  SessionLedger ledger(dir_ + "/sessions");
  for (const char* bad : {"../etc", "s-/../../x", "s-A", "", "s-x/y"}) {
    EXPECT_FALSE(ledger.Append(bad, 0, Owned("n")).ok()) << bad;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/etc"));
}

TEST_F(SessionLedgerTest, SweepRemovesEntriesOlderThanTheCutoff) {
  SessionLedger ledger(dir_ + "/sessions");
  LedgerRecord old = Owned("node-a");
  old.at = absl::Now() - absl::Hours(48);
  ASSERT_TRUE(ledger.Append(kId, 0, old).ok());
  ASSERT_TRUE(ledger.Append("s-0123456789abcdef01234567-node-b", 0, Owned("node-b")).ok());
  EXPECT_EQ(ledger.Sweep(absl::Now() - absl::Hours(24)), 1);
  EXPECT_FALSE(ledger.Current(kId)->has_value());
  EXPECT_TRUE(ledger.Current("s-0123456789abcdef01234567-node-b")->has_value());
}

TEST(SessionMetaTest, RoundTripsWhatASessionNeedsElsewhere) {
  ManagedSession entry;
  entry.labels = {{"team", "a"}};
  entry.created = absl::FromUnixSeconds(1'700'000'000);
  entry.set_expires(absl::FromUnixSeconds(1'700'003'600));
  entry.idle_timeout = absl::Seconds(120);
  entry.memory_mb = 768;
  entry.cell_defaults.wall_ms = 1234;
  ManagedSession copy;
  ASSERT_TRUE(DecodeSessionMeta(EncodeSessionMeta(entry), &copy).ok());
  EXPECT_EQ(copy.labels, entry.labels);
  EXPECT_EQ(copy.created, entry.created);
  EXPECT_EQ(copy.expires(), entry.expires());
  EXPECT_EQ(copy.idle_timeout, entry.idle_timeout);
  EXPECT_EQ(copy.memory_mb, 768);
  EXPECT_EQ(copy.cell_defaults.wall_ms, 1234);
  EXPECT_FALSE(DecodeSessionMeta("not json", &copy).ok());
}

}  // namespace
}  // namespace warden
