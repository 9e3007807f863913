#include "server/warm_pool.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace warden {

Disposer::Disposer() {
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

Disposer::~Disposer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

void Disposer::Dispose(std::unique_ptr<Session> session) {
  if (!session) return;
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(session));
}

void Disposer::Loop() {
  for (;;) {
    std::unique_ptr<Session> next;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, and nothing left
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    next.reset();  // kills the sandbox, removes its cgroup
  }
}

absl::Status WorkersCannotStart(Language language, const absl::Status& why) {
  return absl::UnavailableError(
      absl::StrCat(LanguageName(language), " workers cannot start: ", why.message()));
}

WarmPool::WarmPool(Executor& executor, SessionOptions options, int size, int max_size, int max_waiting,
                   std::function<void()> on_health_change)
    : executor_(executor), options_(std::move(options)), size_(size),
      max_size_(std::max(size, max_size)), max_waiting_(max_waiting),
      on_health_change_(std::move(on_health_change)) {}

double WarmPool::AcquireRate() const {
  // A pool nobody asked for a while cools down: past a hold, the rate is at
  // most one acquisition per the time since the hold ended. The hold lets
  // the workers a burst asked for finish starting (otherwise the target
  // falls within two start times of the last acquisition, before the
  // fillers catch up) and serves the next burst of a bursty caller.
  const double idle_s = absl::ToDoubleSeconds(absl::Now() - last_acquire_ - kHold);
  return idle_s <= 0 ? acquire_rate_ : std::min(acquire_rate_, 1.0 / idle_s);
}

int WarmPool::Target() const {
  const double want = 2 * AcquireRate() * absl::ToDoubleSeconds(last_start_);
  return std::clamp(static_cast<int>(std::ceil(want)), size_, max_size_);
}

WarmPool::~WarmPool() { Stop(); }

void WarmPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& filler : fillers_) filler.join();
  fillers_.clear();
  std::deque<std::unique_ptr<Session>> ready;
  {
    absl::MutexLock lock(&mu_);
    ready.swap(ready_);
  }
}

void WarmPool::Start() {
  // Starting a kernel is mostly CPU (page faults of the clone, the
  // interpreter's start); one filler per core refills that much faster, and
  // more than that only contend for the same cores.
  const int fillers = std::min<int>(max_size_, std::max(1u, std::thread::hardware_concurrency()));
  fillers_started_ = fillers;
  for (int i = 0; i < fillers; ++i) fillers_.emplace_back([this] { FillLoop(); });
}

void WarmPool::FillLoop() {
  int consecutive_failures = 0;  // this filler's, for its back-off
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto needed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || static_cast<int>(ready_.size()) + starting_ < Target();
      };
      mu_.Await(absl::Condition(&needed));
      if (stopping_) return;
      ++starting_;
    }
    const absl::Time start = absl::Now();
    auto session = Session::Start(executor_, options_);
    bool health_changed = false;
    {
      absl::MutexLock lock(&mu_);
      --starting_;
      if (session.ok()) {
        health_changed = failures_in_a_row_ >= kFailuresToReport;
        failures_in_a_row_ = 0;
        consecutive_failures = 0;
        last_start_ = absl::Now() - start;
        if (!waiters_.empty()) {
          waiters_.front()->session = std::move(*session);  // first come, first served
          waiters_.pop_front();
        } else {
          ready_.push_back(std::move(*session));
        }
      } else {
        ++stats_.start_failures;
        last_failure_ = session.status();
        health_changed = ++failures_in_a_row_ == kFailuresToReport;
        spdlog::error("warm pool ({}): cannot start a kernel: {}", LanguageName(options_.language),
                      std::string(session.status().message()));
      }
    }
    // Outside the lock: the listener reads Health() (the daemon's gRPC health).
    if (health_changed && on_health_change_) on_health_change_();
    if (session.ok()) continue;
    // Back off (up to 6.4 s) so a broken host does not spin; stop early on shutdown.
    absl::MutexLock lock(&mu_);
    const absl::Duration pause = absl::Milliseconds(100) * (1 << std::min(++consecutive_failures, 6));
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), pause);
  }
}

absl::StatusOr<std::unique_ptr<Session>> WarmPool::Acquire(absl::Time deadline) {
  if (size_ == 0) {
    auto session = Session::Start(executor_, options_);
    if (!session.ok()) return WorkersCannotStart(options_.language, session.status());
    return session;
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  ++stats_.acquired;
  const absl::Time now = absl::Now();
  const double gap_s = std::max(1e-3, absl::ToDoubleSeconds(now - last_acquire_));
  acquire_rate_ = 0.8 * AcquireRate() + 0.2 / gap_s;
  last_acquire_ = now;
  if (ready_.empty()) {
    ++stats_.misses;
    // Waiting would only end in a retry hint: say why instead.
    RETURN_IF_ERROR(HealthLocked());
    if (stats_.waiting >= max_waiting_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "all ", size_, " warm ", LanguageName(options_.language), " workers are busy and ",
          stats_.waiting, " requests already wait; retry in about ",
          absl::ToInt64Milliseconds(last_start_), " ms"));
    }
    ++stats_.waiting;
    Waiter waiter;
    waiters_.push_back(&waiter);
    auto handed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || waiter.session != nullptr || failures_in_a_row_ >= kFailuresToReport;
    };
    mu_.AwaitWithDeadline(absl::Condition(&handed), deadline);
    --stats_.waiting;
    if (waiter.session == nullptr) {
      waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &waiter));
      if (stopping_) return absl::UnavailableError("the server is shutting down");
      RETURN_IF_ERROR(HealthLocked());
      return absl::ResourceExhaustedError(absl::StrCat(
          "no warm ", LanguageName(options_.language),
          " worker became free in time; retry in about ", absl::ToInt64Milliseconds(last_start_), " ms"));
    }
    if (waiter.session->Alive()) return std::move(waiter.session);
    ready_.push_front(std::move(waiter.session));  // dropped as dead just below
  }
  // A ready session may have died while it waited (killed from outside, say).
  while (!ready_.empty()) {
    std::unique_ptr<Session> session = std::move(ready_.front());
    ready_.pop_front();
    if (session->Alive()) return session;
    ++stats_.start_failures;
    spdlog::warn("warm pool ({}): dropping a worker that died while idle", LanguageName(options_.language));
  }
  mu_.Unlock();
  auto fresh = Session::Start(executor_, options_);  // the filler catches up meanwhile
  mu_.Lock();
  if (!fresh.ok()) return WorkersCannotStart(options_.language, fresh.status());
  return fresh;
}

absl::Status WarmPool::HealthLocked() const {
  if (failures_in_a_row_ < kFailuresToReport) return absl::OkStatus();
  return WorkersCannotStart(options_.language, last_failure_);
}

absl::Status WarmPool::Health() const {
  absl::MutexLock lock(&mu_);
  return HealthLocked();
}

WarmPoolStats WarmPool::Stats() const {
  absl::MutexLock lock(&mu_);
  WarmPoolStats stats = stats_;
  stats.ready = static_cast<int>(ready_.size());
  stats.target = size_ == 0 ? 0 : Target();
  stats.acquire_per_s = AcquireRate();
  stats.capacity_per_s = fillers_started_ / std::max(1e-3, absl::ToDoubleSeconds(last_start_));
  stats.failing = !HealthLocked().ok();
  return stats;
}

}  // namespace warden
