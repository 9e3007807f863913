#include "admission/tenant_queue.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

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

TenantQueue::TenantQueue(TenantQueueOptions options)
    : options_(std::move(options)), line_(std::numeric_limits<int>::max()) {
  expirer_ = std::thread([this] { ExpireLoop(); });
}

TenantQueue::~TenantQueue() {
  Stop();
  if (expirer_.joinable()) expirer_.join();
}

bool TenantQueue::HasRoom(const Tenant& t) const {
  if (options_.max_running > 0 && stats_.running >= options_.max_running) return false;
  return t.running < options_.max_running_per_tenant;
}

int TenantQueue::Servers() const {
  int servers = options_.max_running_per_tenant;
  if (options_.max_running > 0) {
    servers = std::min(servers, options_.max_running / std::max<int>(1, tenants_.size()));
  }
  return std::max(1, servers);
}

void TenantQueue::Forget(const std::string& tenant) {
  auto it = tenants_.find(tenant);
  if (it != tenants_.end() && it->second.running == 0 && line_.waiting(tenant) == 0) tenants_.erase(it);
}

void TenantQueue::EnterAsync(const std::string& tenant, absl::Time deadline, Admitted admitted) {
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      refused = absl::UnavailableError("the server is shutting down");
    } else {
      Tenant& t = tenants_.try_emplace(tenant, Tenant{0, hold_}).first->second;
      const int ahead = line_.waiting(tenant);
      if (ahead == 0 && HasRoom(t)) {
        // Nobody of this tenant waits and there is room: whoever else waits
        // is held by their own tenant's limit, so going first takes no one's turn.
        line_.Served(tenant);
        ++t.running;
        ++stats_.running;
        ++stats_.admitted;
      } else if (ahead >= options_.max_waiting_per_tenant) {
        ++stats_.refused;
        const absl::Duration wait = t.hold.For(ahead + 1, Servers());
        refused = absl::ResourceExhaustedError(absl::StrCat(
            "you already run ", t.running, " ", options_.noun, " and ", ahead,
            " more wait, the most the server queues for one tenant (", options_.waiting_key,
            "); retry in about ", RetryMs(wait), " ms"));
      } else {
        // Its turn comes once the `ahead` before it, and one of those
        // running now, have ended, at the rate this tenant's turns end.
        const absl::Time now = absl::Now();
        const absl::Duration wait = t.hold.For(ahead + 1, Servers());
        if (now + wait > deadline) {
          ++stats_.too_late;
          refused = absl::ResourceExhaustedError(absl::StrCat(
              "your turn would come too late: you run ", t.running, " ", options_.noun, " at once and ", ahead,
              " more wait, each turn lasting about ", Spoken(t.hold.mean()), ", so yours would wait about ",
              Spoken(wait), ", past your deadline (", Spoken(std::max(absl::ZeroDuration(), deadline - now)),
              " from now); retry in about ", RetryMs(wait - (deadline - now)), " ms, or with a later deadline"));
        } else {
          ++stats_.queued;
          line_.Push(tenant, deadline, now, std::move(admitted));
          stats_.waiting = line_.size();
          return;
        }
      }
      if (!refused.ok()) Forget(tenant);
    }
  }
  if (refused.ok()) {
    std::move(admitted)(Slot(this, tenant));
  } else {
    std::move(admitted)(refused);
  }
}

absl::StatusOr<TenantQueue::Slot> TenantQueue::Enter(const std::string& tenant, absl::Time deadline) {
  absl::Notification done;
  absl::StatusOr<Slot> out = absl::UnknownError("never answered");
  EnterAsync(tenant, deadline, [&](absl::StatusOr<Slot> slot) {
    out = std::move(slot);
    done.Notify();
  });
  done.WaitForNotification();
  return out;
}

void TenantQueue::Leave(const std::string& tenant, absl::Duration held) {
  std::vector<Line::Taken> admitted;
  {
    absl::MutexLock lock(&mu_);
    auto it = tenants_.find(tenant);
    if (it == tenants_.end()) return;  // cannot happen: a slot keeps its tenant's entry
    --it->second.running;
    --stats_.running;
    it->second.hold.Record(held);
    hold_.Record(held);
    Forget(tenant);
    admitted = AdmitWaiters();
  }
  Answer(std::move(admitted));
}

std::vector<TenantQueue::Line::Taken> TenantQueue::AdmitWaiters() {
  std::vector<Line::Taken> admitted;
  if (stopping_) return admitted;
  while (options_.max_running <= 0 || stats_.running < options_.max_running) {
    std::optional<Line::Taken> next = line_.Pop([this](const std::string& tenant)
                                                    ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return HasRoom(tenants_.at(tenant));
    });
    if (!next) break;
    ++tenants_.at(next->tenant).running;
    ++stats_.running;
    ++stats_.admitted;
    admitted.push_back(std::move(*next));
  }
  stats_.waiting = line_.size();
  return admitted;
}

void TenantQueue::Answer(std::vector<Line::Taken> admitted) {
  for (Line::Taken& taken : admitted) std::move(taken.callback)(Slot(this, taken.tenant));
}

void TenantQueue::ExpireLoop() {
  RefuseAtDeadlines(mu_, stopping_, line_, [this](std::vector<Line::Taken> expired, absl::Time now) {
    mu_.AssertHeld();
    stats_.timed_out += static_cast<int64_t>(expired.size());
    stats_.waiting = line_.size();
    std::vector<absl::Status> why;
    for (const Line::Taken& taken : expired) {
      const Tenant& t = tenants_.at(taken.tenant);
      const int still = line_.waiting(taken.tenant);
      why.push_back(absl::ResourceExhaustedError(absl::StrCat(
          "your turn did not come before your deadline (you waited ", Spoken(now - taken.since),
          "; you run ", t.running, " ", options_.noun, " at once, your maximum, and ", still,
          " more wait); retry in about ", RetryMs(t.hold.For(still + 1, Servers())), " ms")));
    }
    for (const Line::Taken& taken : expired) Forget(taken.tenant);
    return [expired = std::move(expired), why = std::move(why)]() mutable {
      for (size_t i = 0; i < expired.size(); ++i) std::move(expired[i].callback)(why[i]);
    };
  });
}

void TenantQueue::Stop() {
  std::vector<Line::Taken> waiting;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    waiting = line_.TakeAll();
    stats_.waiting = 0;
    for (const Line::Taken& taken : waiting) Forget(taken.tenant);
  }
  for (Line::Taken& taken : waiting) {
    std::move(taken.callback)(absl::UnavailableError("the server is shutting down"));
  }
}

TenantQueueStats TenantQueue::Stats() const {
  absl::MutexLock lock(&mu_);
  TenantQueueStats stats = stats_;
  stats.turns_per_s = hold_.PerSecond(options_.max_running > 0 ? options_.max_running
                                                               : options_.max_running_per_tenant);
  return stats;
}

std::pair<int, int> TenantQueue::TenantLoad(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return {0, 0};
  return {it->second.running, line_.waiting(tenant)};
}

}  // namespace warden
