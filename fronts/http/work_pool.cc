#include "fronts/http/work_pool.h"

#include <algorithm>
#include <utility>

namespace warden::http {

WorkPool::WorkPool(int min_threads, int max_threads, absl::Duration idle_exit)
    : min_threads_(std::max(1, min_threads)),
      max_threads_(std::max(std::max(1, min_threads), max_threads)),
      idle_exit_(idle_exit) {}

WorkPool::~WorkPool() { Stop(); }

bool WorkPool::Submit(absl::AnyInvocable<void() &&> work) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  JoinFinished();
  queue_.push_back(std::move(work));
  // Idle threads take queued work; start one more when they are too few.
  if (static_cast<size_t>(idle_) < queue_.size() && alive_ < max_threads_) {
    ++alive_;
    threads_.emplace_back([this] { Loop(); });
  }
  return true;
}

void WorkPool::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    ++idle_;
    const bool woken = mu_.AwaitWithTimeout(
        absl::Condition(
            +[](WorkPool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) {
              return pool->stopping_ || !pool->queue_.empty();
            },
            this),
        idle_exit_);
    --idle_;
    if (queue_.empty()) {
      if (stopping_ || (!woken && alive_ > min_threads_)) {
        --alive_;
        finished_.push_back(std::this_thread::get_id());
        return;
      }
      continue;
    }
    {
      absl::AnyInvocable<void() &&> work = std::move(queue_.front());
      queue_.pop_front();
      mu_.Unlock();
      std::move(work)();
      // `work` and what it holds are destroyed here, outside the lock: a
      // destructor may well submit more.
    }
    mu_.Lock();
  }
}

void WorkPool::JoinFinished() {
  for (const std::thread::id id : finished_) {
    auto it = std::find_if(threads_.begin(), threads_.end(), [id](const std::thread& t) { return t.get_id() == id; });
    if (it == threads_.end()) continue;
    // It has left Loop (it held the lock we hold now until then).
    it->join();
    threads_.erase(it);
  }
  finished_.clear();
}

void WorkPool::Stop() {
  std::list<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads = std::move(threads_);
    threads_.clear();
    finished_.clear();
  }
  // Queued work runs first: each thread leaves only once the queue is empty.
  for (std::thread& t : threads) t.join();
}

bool WorkPool::WaitIdle(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && idle_ == alive_; };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

int WorkPool::threads() const {
  absl::MutexLock lock(&mu_);
  return alive_;
}

int WorkPool::busy() const {
  absl::MutexLock lock(&mu_);
  return alive_ - idle_;
}

int WorkPool::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

}  // namespace warden::http
