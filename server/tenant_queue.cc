#include "server/tenant_queue.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace warden {

TenantQueue::Slot& TenantQueue::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    queue_ = other.queue_;
    tenant_ = std::move(other.tenant_);
    since_ = other.since_;
    other.queue_ = nullptr;
  }
  return *this;
}

void TenantQueue::Slot::Release() {
  if (queue_ == nullptr) return;
  TenantQueue* queue = queue_;
  queue_ = nullptr;
  queue->Leave(tenant_, absl::Now() - since_);
}

TenantQueue::TenantQueue(TenantQueueOptions options) : options_(options) {}

TenantQueue::~TenantQueue() = default;

bool TenantQueue::HasRoom(const Tenant& t) const {
  if (options_.max_running > 0 && stats_.running >= options_.max_running) return false;
  return t.running < options_.max_running_per_tenant;
}

int64_t TenantQueue::RetryHintMs() const {
  return std::max<int64_t>(1, absl::ToInt64Milliseconds(mean_hold_));
}

absl::StatusOr<TenantQueue::Slot> TenantQueue::Enter(const std::string& tenant, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  Tenant& t = tenants_[tenant];
  // Nobody of this tenant waits and there is room: whoever else waits is
  // held by their own tenant's limit, so going first takes no one's turn.
  if (t.waiting.empty() && HasRoom(t)) {
    turn_ = tenant;
    ++t.running;
    ++stats_.running;
    ++stats_.admitted;
    return Slot(this, tenant);
  }
  if (static_cast<int>(t.waiting.size()) >= options_.max_waiting_per_tenant) {
    ++stats_.refused;
    const int64_t hint = RetryHintMs() * (1 + static_cast<int64_t>(t.waiting.size()) /
                                                  std::max(1, options_.max_running_per_tenant));
    return absl::ResourceExhaustedError(absl::StrCat(
        "you already run ", t.running, " executions and ", t.waiting.size(),
        " more wait, the most the server queues for one tenant; retry in about ", hint, " ms"));
  }
  Waiter waiter;
  t.waiting.push_back(&waiter);
  ++stats_.waiting;
  ++stats_.queued;
  auto admitted_or_stopping = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return waiter.admitted || stopping_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&admitted_or_stopping), deadline);
  if (waiter.admitted) {
    ++stats_.admitted;
    return Slot(this, tenant);
  }
  // Still in line (AdmitWaiters removes whom it admits): leave it.
  std::deque<Waiter*>& line = t.waiting;
  line.erase(std::find(line.begin(), line.end(), &waiter));
  --stats_.waiting;
  const int running = t.running;
  if (t.running == 0 && t.waiting.empty()) tenants_.erase(tenant);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  ++stats_.timed_out;
  return absl::ResourceExhaustedError(absl::StrCat(
      "your turn did not come in time (you run ", running,
      " executions at once, your maximum); retry in about ", RetryHintMs(), " ms"));
}

void TenantQueue::Leave(const std::string& tenant, absl::Duration held) {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return;  // cannot happen: a slot keeps its tenant's entry
  --it->second.running;
  --stats_.running;
  mean_hold_ = mean_hold_ * 0.9 + held * 0.1;
  if (it->second.running == 0 && it->second.waiting.empty()) tenants_.erase(it);
  AdmitWaiters();
}

void TenantQueue::AdmitWaiters() {
  for (;;) {
    if (options_.max_running > 0 && stats_.running >= options_.max_running) return;
    // The first tenant after the one served last (by name, wrapping round)
    // that has someone waiting and room of its own.
    auto it = tenants_.upper_bound(turn_);
    bool found = false;
    for (size_t i = 0; i < tenants_.size(); ++i, ++it) {
      if (it == tenants_.end()) it = tenants_.begin();
      if (!it->second.waiting.empty() && HasRoom(it->second)) {
        found = true;
        break;
      }
    }
    if (!found) return;
    Tenant& t = it->second;
    t.waiting.front()->admitted = true;
    t.waiting.pop_front();
    ++t.running;
    ++stats_.running;
    --stats_.waiting;
    turn_ = it->first;
  }
}

void TenantQueue::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

TenantQueueStats TenantQueue::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

std::pair<int, int> TenantQueue::TenantLoad(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return {0, 0};
  return {it->second.running, static_cast<int>(it->second.waiting.size())};
}

}  // namespace warden
