// Liveness: whether the gateway counts one node as up, decided from its
// asks (GetNodeStatus every nodes.poll_interval_ms, each with a deadline of
// nodes.poll_timeout_ms, sent whether or not earlier ones have answered)
// and from what the node says on proxied calls. A node is down once
// `down_after` asks in a row have failed with nothing heard from it since
// the first of them was sent, or at once when its connection cannot be
// made. A stopped or cut-off node (no connection refused) is therefore
// down within poll_timeout + down_after * poll_interval of the last thing
// it said (DetectionBound), while a node that is slow to answer its asks
// but answers calls stays up. Times are the caller's, so that the rule is
// tested without a network (gateway_unit_test).
#pragma once

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace warden::gateway {

class Liveness {
 public:
  explicit Liveness(int down_after) : down_after_(down_after) {}

  // An ask answered at `now`: up.
  void Answered(absl::Time now);
  // The node said something on a proxied call at `now` (headers, a
  // message): alive, though only an answered ask brings it back up.
  void Heard(absl::Time now);
  // An ask sent at `sent` failed at `now` (`why`); `unreachable`: its
  // connection cannot be made. True when the node goes down with it.
  bool Failed(absl::Time sent, absl::Time now, bool unreachable, const std::string& why);

  bool up() const { return up_; }
  absl::Time last_heard() const { return last_heard_; }  // InfinitePast: never
  absl::Time down_since() const { return down_since_; }
  const std::string& down_reason() const { return down_reason_; }

 private:
  const int down_after_;
  bool up_ = false;
  int failures_ = 0;  // asks in a row failed since it was last heard
  absl::Time last_heard_ = absl::InfinitePast();
  absl::Time down_since_ = absl::Now();
  std::string down_reason_ = "not asked yet";
};

// The longest a node that stopped answering stays up, by the rule above:
// the first counted ask may go up to one interval after the node last
// spoke, and the last of `down_after` fails poll_timeout after it is sent.
absl::Duration DetectionBound(int64_t poll_interval_ms, int64_t poll_timeout_ms, int down_after);

}  // namespace warden::gateway
