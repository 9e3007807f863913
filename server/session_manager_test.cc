// ManagedSession's turn (Begin/End) when the session ends under a call
// waiting for it: what the call hears.
#include "server/session_manager.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "server/fleet_hint.h"

namespace warden {
namespace {

// A drain hands a session over while a call that found it before the
// drain began waits for its turn (or has yet to ask): the call must hear
// MOVING, which a gateway follows to the session's next node, and never
// NOT_FOUND, which would end it (server/engine_fleet.cc, HandOver).
TEST(ManagedSessionTest, ACallWaitingForItsTurnHearsWhereTheSessionWent) {
  ManagedSession entry;
  entry.id = "s-000000000000000000000001-n1";
  ASSERT_TRUE(entry.Begin(absl::Now()).ok());  // the handover's turn
  absl::Notification asked;
  absl::Status waited;
  std::thread call([&] {
    asked.Notify();
    waited = entry.Begin(absl::Now() + absl::Seconds(60));
  });
  asked.WaitForNotification();
  entry.SetEndedBy(WithFleetHint(absl::UnavailableError("handed over"), v1::FleetHint::MOVING, "n1"));
  entry.MarkClosed();
  entry.End();
  call.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable) << waited;
  ASSERT_TRUE(FleetHintOf(waited).has_value()) << waited;
  EXPECT_EQ(FleetHintOf(waited)->kind(), v1::FleetHint::MOVING);
  // A call that asks only now, and a file call, hear the same.
  EXPECT_EQ(FleetHintOf(entry.Begin(absl::Now())).value_or(v1::FleetHint()).kind(), v1::FleetHint::MOVING);
  EXPECT_EQ(FleetHintOf(entry.CheckOpen()).value_or(v1::FleetHint()).kind(), v1::FleetHint::MOVING);
}

TEST(ManagedSessionTest, ASessionClosedByItsTenantIsNotFound) {
  ManagedSession entry;
  entry.id = "s-000000000000000000000002";
  EXPECT_TRUE(entry.CheckOpen().ok());
  entry.MarkClosed();
  EXPECT_TRUE(absl::IsNotFound(entry.Begin(absl::Now()))) << entry.Begin(absl::Now());
  EXPECT_TRUE(absl::IsNotFound(entry.CheckOpen()));
  EXPECT_FALSE(FleetHintOf(entry.Begin(absl::Now())).has_value());
}

}  // namespace
}  // namespace warden
