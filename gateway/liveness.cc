#include "gateway/liveness.h"

#include <algorithm>

namespace warden::gateway {

void Liveness::Answered(absl::Time now) {
  up_ = true;
  failures_ = 0;
  last_heard_ = std::max(last_heard_, now);
}

void Liveness::Heard(absl::Time now) { last_heard_ = std::max(last_heard_, now); }

bool Liveness::Failed(absl::Time sent, absl::Time now, bool unreachable, const std::string& why) {
  if (!up_) {
    down_reason_ = why;
    return false;
  }
  // The node spoke after this ask went out: the ask was slow, not the node gone.
  if (!unreachable && last_heard_ >= sent) {
    failures_ = 0;
    return false;
  }
  if (!unreachable && ++failures_ < down_after_) return false;
  up_ = false;
  down_since_ = now;
  down_reason_ = why;
  return true;
}

absl::Duration DetectionBound(int64_t poll_interval_ms, int64_t poll_timeout_ms, int down_after) {
  return absl::Milliseconds(poll_timeout_ms + static_cast<int64_t>(down_after) * poll_interval_ms);
}

}  // namespace warden::gateway
