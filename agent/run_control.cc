#include "agent/run_control.h"

#include <vector>

namespace warden::agent {

void RunControl::Cancel() {
  std::vector<std::function<void()>> hooks;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return;
    cancelled_ = true;
    for (auto& [id, hook] : hooks_) hooks.push_back(hook);
  }
  for (auto& hook : hooks) hook();
}

bool RunControl::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

int RunControl::AddHook(std::function<void()> hook) {
  int id;
  {
    absl::MutexLock lock(&mu_);
    id = next_id_++;
    if (!cancelled_) {
      hooks_.emplace(id, std::move(hook));
      return id;
    }
  }
  hook();
  return id;
}

void RunControl::RemoveHook(int id) {
  absl::MutexLock lock(&mu_);
  hooks_.erase(id);
}

bool RunControl::SleepFor(absl::Duration duration) {
  absl::MutexLock lock(&mu_);
  auto cancelled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return cancelled_; };
  mu_.AwaitWithTimeout(absl::Condition(&cancelled), duration);
  return !cancelled_;
}

}  // namespace warden::agent
