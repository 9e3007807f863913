// FairLine: requests waiting for something there is too little of for now
// (a warm sandbox, a turn to run), each until its own deadline, and none on
// a thread of its own: a waiter is its callback, two times and its place in
// two indexes (about 150 bytes, plus what the callback captures). Within a
// tenant requests are served in the order they came; the tenants with
// someone waiting are served in turn (round robin, by name), so a burst of
// one tenant delays another tenant's request by at most one turn for each
// request that tenant has ahead of it, never by the whole burst.
//
// Not thread-safe: its owner's mutex guards it. The callbacks it hands back
// (Pop, Expire, TakeAll) the owner calls after releasing that mutex, since a
// callback may well call into the owner again.
#pragma once

#include <algorithm>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace warden {

template <typename Callback>
class FairLine {
 public:
  // A waiter taken out of the line.
  struct Taken {
    std::string tenant;
    Callback callback;
    absl::Time since;  // when it joined
  };

  explicit FairLine(int max_waiting) : max_waiting_(std::max(1, max_waiting)) {}
  FairLine(const FairLine&) = delete;
  FairLine& operator=(const FairLine&) = delete;

  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int max_waiting() const { return max_waiting_; }
  bool full() const { return size_ >= max_waiting_; }
  int waiting(const std::string& tenant) const {
    auto it = lines_.find(tenant);
    return it == lines_.end() ? 0 : static_cast<int>(it->second.size());
  }

  // How many would be served before a request that `tenant` adds now: the
  // tenant's own line, and from every other tenant as many as take a turn
  // meanwhile. A lower bound: requests that come later take turns as well.
  int Ahead(const std::string& tenant) const {
    const int own = waiting(tenant);
    int ahead = own;
    for (const auto& [name, line] : lines_) {
      if (name != tenant) ahead += std::min(static_cast<int>(line.size()), own);
    }
    return ahead;
  }

  // Adds a waiter, after the tenant's others (or, `first`, before them);
  // the owner has checked full(). An infinite deadline never expires.
  void Push(const std::string& tenant, absl::Time deadline, absl::Time now, Callback callback,
            bool first = false) {
    auto [line, inserted] = lines_.try_emplace(tenant);
    auto& waiters = line->second;
    auto at = waiters.emplace(first ? waiters.begin() : waiters.end(),
                              Waiter{std::move(callback), now, deadline});
    if (deadline != absl::InfiniteFuture()) deadlines_.emplace(deadline, Ref{&line->first, at});
    ++size_;
  }

  // The next waiter in turn: of the first tenant after the one served last
  // (by name, wrapping round) that has someone waiting and that `eligible`
  // (if set) accepts.
  std::optional<Taken> Pop(const std::function<bool(const std::string&)>& eligible = nullptr) {
    auto it = lines_.upper_bound(turn_);
    for (size_t i = 0; i < lines_.size(); ++i, ++it) {
      if (it == lines_.end()) it = lines_.begin();
      if (eligible && !eligible(it->first)) continue;
      turn_ = it->first;
      return Remove(it, it->second.begin());
    }
    return std::nullopt;
  }

  // Records that `tenant` was served without waiting: the next turn is the
  // next tenant's.
  void Served(const std::string& tenant) { turn_ = tenant; }

  // The waiters whose deadline is `now` or earlier, earliest first.
  std::vector<Taken> Expire(absl::Time now) {
    std::vector<Taken> out;
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      const Ref ref = deadlines_.begin()->second;
      out.push_back(Remove(lines_.find(*ref.tenant), ref.waiter));
    }
    return out;
  }

  // When the next waiter expires (InfiniteFuture if none can).
  absl::Time NextDeadline() const {
    return deadlines_.empty() ? absl::InfiniteFuture() : deadlines_.begin()->first;
  }

  // Every waiter, in turn order.
  std::vector<Taken> TakeAll() {
    std::vector<Taken> out;
    while (std::optional<Taken> next = Pop()) out.push_back(std::move(*next));
    return out;
  }

 private:
  struct Waiter {
    Callback callback;
    absl::Time since;
    absl::Time deadline;
  };
  using Waiters = std::list<Waiter>;
  using Lines = std::map<std::string, Waiters>;  // tenants with someone waiting
  struct Ref {
    const std::string* tenant;  // a key of lines_: stable while it has waiters
    typename Waiters::iterator waiter;
  };

  Taken Remove(typename Lines::iterator line, typename Waiters::iterator waiter) {
    if (waiter->deadline != absl::InfiniteFuture()) {
      auto [from, to] = deadlines_.equal_range(waiter->deadline);
      for (auto d = from; d != to; ++d) {
        if (d->second.waiter == waiter) {
          deadlines_.erase(d);
          break;
        }
      }
    }
    Taken taken{line->first, std::move(waiter->callback), waiter->since};
    line->second.erase(waiter);
    if (line->second.empty()) lines_.erase(line);
    --size_;
    return taken;
  }

  const int max_waiting_;
  Lines lines_;
  std::multimap<absl::Time, Ref> deadlines_;
  std::string turn_;  // the tenant served last
  int size_ = 0;
};

// The loop of an owner's thread that refuses waiters at their deadlines. It
// sleeps under `mu` until the line's earliest deadline, woken early when an
// earlier one joins or `stopping` turns true (both are guarded by `mu`, and
// whoever changes them holds it). What expired goes to `refuse(expired,
// now)`, called with `mu` held, which returns what to run once `mu` is
// released: the waiters' callbacks, which may call into the owner again.
template <typename Callback, typename Refuse>
void RefuseAtDeadlines(absl::Mutex& mu, const bool& stopping, FairLine<Callback>& line, Refuse refuse) {
  absl::MutexLock lock(&mu);
  while (!stopping) {
    const absl::Time armed = line.NextDeadline();
    // A later deadline is found when this one passes.
    auto earlier = [&stopping, &line, armed] { return stopping || line.NextDeadline() < armed; };
    mu.AwaitWithDeadline(absl::Condition(&earlier), armed);
    if (stopping) break;
    const absl::Time now = absl::Now();
    std::vector<typename FairLine<Callback>::Taken> expired = line.Expire(now);
    if (expired.empty()) continue;
    auto deliver = refuse(std::move(expired), now);
    mu.Unlock();
    deliver();
    mu.Lock();
  }
}

}  // namespace warden
