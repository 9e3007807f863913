#include "admission/service_time.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace warden {

absl::Duration ServiceTime::For(int n, int servers) const {
  return mean_ * std::max(0, n) / std::max(1, servers);
}

double ServiceTime::PerSecond(int servers) const {
  return std::max(1, servers) / std::max(1e-6, absl::ToDoubleSeconds(mean_));
}

std::string Spoken(absl::Duration d) {
  const double ms = absl::ToDoubleMilliseconds(d);
  if (ms < 10'000) return absl::StrFormat("%.0f ms", std::max(0.0, ms));
  return absl::StrFormat("%.1f s", ms / 1000);
}

int64_t RetryMs(absl::Duration d) { return std::max<int64_t>(1, absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1)))); }

}  // namespace warden
