// ServiceTime: how long serving one request takes lately (starting a
// sandbox, holding a turn), measured, and from it how long a line takes to
// be served by `servers` working in parallel: n requests take n times the
// mean over the servers (Little's law). It is what the lines in this
// directory refuse by (a request that could not be served before its
// deadline is refused at once, not at the deadline) and what their retry
// hints say.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace warden {

class ServiceTime {
 public:
  // `initial`: the mean until something is measured.
  explicit ServiceTime(absl::Duration initial) : mean_(initial) {}

  // One served in `took`. The mean moves a fifth of the way to each new
  // measure: it follows a machine that slows under a burst within a few
  // starts, and one slow start does not double it.
  void Record(absl::Duration took) {
    mean_ = measured_ ? mean_ * 0.8 + took * 0.2 : took;
    measured_ = true;
  }
  absl::Duration mean() const { return mean_; }
  bool measured() const { return measured_; }

  // Until the `n`th request from now is served by `servers` in parallel.
  absl::Duration For(int n, int servers) const;
  // Requests served per second by `servers`.
  double PerSecond(int servers) const;

 private:
  absl::Duration mean_;
  bool measured_ = false;
};

// A duration as the retry hints and messages say it: "340 ms", "12.5 s".
std::string Spoken(absl::Duration d);
// At least a millisecond, in whole milliseconds: the "retry in about N ms" of
// every refusal (clients parse it).
int64_t RetryMs(absl::Duration d);

}  // namespace warden
