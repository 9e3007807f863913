#include "fronts/http/work_pool.h"

#include <algorithm>
#include <utility>

namespace warden::http {

WorkPool::WorkPool(int min_threads, int max_threads, absl::Duration idle_exit, int max_per_tenant)
    : min_threads_(std::max(1, min_threads)),
      max_threads_(std::max(std::max(1, min_threads), max_threads)),
      idle_exit_(idle_exit),
      max_per_tenant_(max_per_tenant > 0 ? std::min(max_per_tenant, max_threads_) : max_threads_) {}

WorkPool::~WorkPool() { Stop(); }

bool WorkPool::Submit(Work work, const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  JoinFinished();
  Line& line = lines_[tenant];
  if (line.queue.empty()) turns_.push_back(tenant);
  line.queue.push_back(std::move(work));
  ++queued_;
  // Idle threads take runnable work; start one more when they are too few.
  if (idle_ < Runnable() && alive_ < max_threads_) {
    ++alive_;
    threads_.emplace_back([this] { Loop(); });
  }
  return true;
}

int WorkPool::Runnable() const {
  int n = 0;
  for (const std::string& tenant : turns_) {
    const Line& line = lines_.at(tenant);
    n += std::min<int>(static_cast<int>(line.queue.size()), std::max(0, max_per_tenant_ - line.running));
  }
  return n;
}

bool WorkPool::TakeNext(Work* work, std::string* tenant) {
  for (auto it = turns_.begin(); it != turns_.end(); ++it) {
    Line& line = lines_.at(*it);
    if (line.running >= max_per_tenant_) continue;  // at its share: the next tenant's turn
    *work = std::move(line.queue.front());
    line.queue.pop_front();
    ++line.running;
    --queued_;
    *tenant = std::move(*it);
    turns_.erase(it);
    if (!line.queue.empty()) turns_.push_back(*tenant);  // its next waits for the others'
    return true;
  }
  return false;
}

void WorkPool::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    ++idle_;
    const bool woken = mu_.AwaitWithTimeout(
        absl::Condition(
            +[](WorkPool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) {
              return (pool->stopping_ && pool->queued_ == 0) || pool->Runnable() > 0;
            },
            this),
        idle_exit_);
    --idle_;
    Work work;
    std::string tenant;
    if (!TakeNext(&work, &tenant)) {
      if ((stopping_ && queued_ == 0) || (!woken && alive_ > min_threads_)) {
        --alive_;
        finished_.push_back(std::this_thread::get_id());
        return;
      }
      continue;
    }
    mu_.Unlock();
    std::move(work)();
    // `work` and what it holds are destroyed here, outside the lock: a
    // destructor may well submit more.
    work = nullptr;
    mu_.Lock();
    auto it = lines_.find(tenant);
    if (--it->second.running == 0 && it->second.queue.empty()) lines_.erase(it);
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
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queued_ == 0 && idle_ == alive_; };
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
  return queued_;
}

int WorkPool::running(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = lines_.find(tenant);
  return it == lines_.end() ? 0 : it->second.running;
}

}  // namespace warden::http
