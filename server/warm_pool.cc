#include "server/warm_pool.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
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
      max_size_(std::max(size, max_size)),
      // Starting a kernel is mostly CPU (page faults of the clone, the
      // interpreter's start); one filler per core refills that much faster,
      // and more than that only contend for the same cores.
      max_fillers_(std::max(1u, std::thread::hardware_concurrency())),
      line_(max_waiting), on_health_change_(std::move(on_health_change)) {}

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
  const double want = 2 * AcquireRate() * absl::ToDoubleSeconds(start_time_.mean());
  return std::clamp(static_cast<int>(std::ceil(want)), size_, max_size_);
}

WarmPool::~WarmPool() { Stop(); }

void WarmPool::Stop() {
  std::vector<Handoff> refused;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (Line::Taken& taken : line_.TakeAll()) {
      refused.push_back({std::move(taken.callback), absl::UnavailableError("the server is shutting down")});
    }
    stats_.waiting = 0;
  }
  Deliver(std::move(refused));
  for (std::thread& filler : fillers_) filler.join();
  fillers_.clear();
  if (expirer_.joinable()) expirer_.join();
  std::deque<std::unique_ptr<Session>> ready;
  {
    absl::MutexLock lock(&mu_);
    ready.swap(ready_);
  }
}

void WarmPool::Start() {
  fillers_started_ = max_fillers_;
  for (int i = 0; i < fillers_started_; ++i) fillers_.emplace_back([this] { FillLoop(); });
  expirer_ = std::thread([this] { ExpireLoop(); });
}

void WarmPool::Deliver(std::vector<Handoff> handoffs) {
  for (Handoff& h : handoffs) std::move(h.handed)(std::move(h.result));
}

void WarmPool::FillLoop() {
  int consecutive_failures = 0;  // this filler's, for its back-off
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      // Enough ready for what the recent rate asks, and one starting for
      // each request that waits.
      auto needed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || static_cast<int>(ready_.size()) + starting_ < Target() + line_.size();
      };
      mu_.Await(absl::Condition(&needed));
      if (stopping_) return;
      ++starting_;
    }
    const absl::Time start = absl::Now();
    auto session = Session::Start(executor_, options_);
    bool health_changed = false;
    std::vector<Handoff> handoffs;
    {
      absl::MutexLock lock(&mu_);
      --starting_;
      if (session.ok()) {
        health_changed = failures_in_a_row_ >= kFailuresToReport;
        failures_in_a_row_ = 0;
        consecutive_failures = 0;
        start_time_.Record(absl::Now() - start);
        if (std::optional<Line::Taken> next = line_.Pop()) {
          handoffs.push_back({std::move(next->callback), std::move(*session)});  // in turn
          stats_.waiting = line_.size();
        } else {
          ready_.push_back(std::move(*session));
        }
      } else {
        ++stats_.start_failures;
        last_failure_ = session.status();
        spdlog::error("warm pool ({}): cannot start a kernel: {}", LanguageName(options_.language),
                      std::string(session.status().message()));
        if (size_ == 0) {
          // On demand (no pool configured): the request it started for
          // hears why, as if it had started the kernel itself; a language
          // nobody configured has no health of its own to lose.
          if (std::optional<Line::Taken> next = line_.Pop()) {
            handoffs.push_back({std::move(next->callback), WorkersCannotStart(options_.language, session.status())});
            stats_.waiting = line_.size();
          }
        } else if (health_changed = ++failures_in_a_row_ == kFailuresToReport; health_changed) {
          // Waiting would only end at their deadlines: they hear why now.
          for (Line::Taken& taken : line_.TakeAll()) {
            handoffs.push_back({std::move(taken.callback), HealthLocked()});
          }
          stats_.waiting = 0;
        }
      }
    }
    // Outside the lock: the callbacks may call into the pool, and the
    // listener reads Health() (the daemon's gRPC health).
    Deliver(std::move(handoffs));
    if (health_changed && on_health_change_) on_health_change_();
    if (session.ok() || size_ == 0) continue;
    // Back off (up to 6.4 s) so a broken host does not spin; stop early on shutdown.
    absl::MutexLock lock(&mu_);
    const absl::Duration pause = absl::Milliseconds(100) * (1 << std::min(++consecutive_failures, 6));
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), pause);
  }
}

void WarmPool::ExpireLoop() {
  RefuseAtDeadlines(mu_, stopping_, line_, [this](std::vector<Line::Taken> expired, absl::Time now) {
    mu_.AssertHeld();
    stats_.timed_out += static_cast<int64_t>(expired.size());
    stats_.waiting = line_.size();
    // A new request at the back of the line would wait this long.
    const absl::Duration drain = start_time_.For(line_.size() + 1, Fillers());
    std::vector<Handoff> refused;
    for (Line::Taken& taken : expired) {
      refused.push_back({std::move(taken.callback), absl::ResourceExhaustedError(absl::StrCat(
          "no warm ", LanguageName(options_.language), " worker came for you before your deadline (you waited ",
          Spoken(now - taken.since), "; ", line_.size(), " requests still wait, served at about ",
          absl::StrFormat("%.0f", start_time_.PerSecond(Fillers())), " per second); retry in about ",
          RetryMs(drain), " ms"))});
    }
    return [refused = std::move(refused)]() mutable { Deliver(std::move(refused)); };
  });
}

std::unique_ptr<Session> WarmPool::TakeReady() {
  // A ready session may have died while it waited (killed from outside, say).
  while (!ready_.empty()) {
    std::unique_ptr<Session> session = std::move(ready_.front());
    ready_.pop_front();
    if (session->Alive()) return session;
    ++stats_.start_failures;
    spdlog::warn("warm pool ({}): dropping a worker that died while idle", LanguageName(options_.language));
  }
  return nullptr;
}

absl::Status WarmPool::Admit(const std::string& tenant, absl::Time deadline, absl::Time now, bool first) {
  // Waiting would only end in a retry hint: say why instead.
  RETURN_IF_ERROR(HealthLocked());
  const std::string what = absl::StrCat("a warm ", LanguageName(options_.language), " worker");
  const double per_s = start_time_.PerSecond(Fillers());
  if (line_.full()) {
    ++stats_.refused_full;
    return absl::ResourceExhaustedError(absl::StrCat(
        line_.size(), " requests already wait for ", what, ", the most wardend queues (queue.max_depth); retry in about ",
        RetryMs(start_time_.For(line_.size(), Fillers())), " ms"));
  }
  // It is served once the fillers have started a worker for each request
  // ahead of it, and one for it, at the rate they have been starting them.
  const int ahead = first ? 0 : line_.Ahead(tenant);
  const absl::Duration wait = start_time_.For(ahead + 1, Fillers());
  if (now + wait > deadline) {
    ++stats_.refused_late;
    return absl::ResourceExhaustedError(absl::StrCat(
        ahead, " requests wait ahead of yours for ", what, ", started at about ", absl::StrFormat("%.0f", per_s),
        " per second: yours would wait about ", Spoken(wait), ", past your deadline (",
        Spoken(std::max(absl::ZeroDuration(), deadline - now)), " from now); retry in about ",
        RetryMs(wait - (deadline - now)), " ms, or with a later deadline"));
  }
  return absl::OkStatus();
}

void WarmPool::AcquireAsync(const std::string& tenant, absl::Time deadline, Handed handed, bool first) {
  absl::StatusOr<std::unique_ptr<Session>> now_answer = absl::UnknownError("unanswered");
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      now_answer = absl::UnavailableError("the server is shutting down");
    } else {
      ++stats_.acquired;
      const absl::Time now = absl::Now();
      const double gap_s = std::max(1e-3, absl::ToDoubleSeconds(now - last_acquire_));
      acquire_rate_ = 0.8 * AcquireRate() + 0.2 / gap_s;
      last_acquire_ = now;
      // Those already waiting come first.
      std::unique_ptr<Session> ready = line_.empty() ? TakeReady() : nullptr;
      if (ready) {
        now_answer = std::move(ready);
      } else {
        ++stats_.misses;
        if (absl::Status refused = Admit(tenant, deadline, now, first); !refused.ok()) {
          now_answer = refused;
        } else {
          line_.Push(tenant, deadline, now, std::move(handed), first);
          stats_.waiting = line_.size();
          return;  // a filler wakes: line_ grew
        }
      }
    }
  }
  std::move(handed)(std::move(now_answer));
}

absl::StatusOr<std::unique_ptr<Session>> WarmPool::Acquire(const std::string& tenant, absl::Time deadline,
                                                           bool first) {
  absl::Notification done;
  absl::StatusOr<std::unique_ptr<Session>> out = absl::UnknownError("never answered");
  AcquireAsync(tenant, deadline, [&](absl::StatusOr<std::unique_ptr<Session>> session) {
    out = std::move(session);
    done.Notify();
  }, first);
  done.WaitForNotification();
  return out;
}

void WarmPool::GiveBack(std::unique_ptr<Session> session) {
  if (!session) return;
  std::vector<Handoff> handoffs;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;  // dropped with the pool
    if (std::optional<Line::Taken> next = line_.Pop()) {
      handoffs.push_back({std::move(next->callback), std::move(session)});
      stats_.waiting = line_.size();
    } else {
      ready_.push_front(std::move(session));
    }
  }
  Deliver(std::move(handoffs));
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
  stats.waiting = line_.size();
  stats.target = Target();
  stats.acquire_per_s = AcquireRate();
  stats.capacity_per_s = start_time_.PerSecond(Fillers());
  stats.failing = !HealthLocked().ok();
  return stats;
}

}  // namespace warden
