#include "server/tasks.h"

#include <algorithm>
#include <utility>

namespace warden {

Tasks::Tasks() : state_(std::make_shared<State>()) {}

Tasks::~Tasks() {
  std::vector<std::thread> done;
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
    for (Idle* idle : state_->idle) idle->stop = true;
    state_->idle.clear();
    // Every thread without work leaves at once; those with work are counted
    // in `running` and stay.
    auto left = [](State* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
      return static_cast<int>(s->threads.size()) <= s->running;
    };
    state_->mu.Await(absl::Condition(+left, state_.get()));
    done.swap(state_->finished);
    for (auto& [id, thread] : state_->threads) thread.detach();
    state_->threads.clear();
  }
  for (std::thread& thread : done) thread.join();
}

void Tasks::Run(std::function<void()> work) {
  std::vector<std::thread> done;
  {
    absl::MutexLock lock(&state_->mu);
    ++state_->running;
    done.swap(state_->finished);
    if (!state_->idle.empty()) {
      state_->idle.back()->work = std::move(work);
      state_->idle.pop_back();
    } else {
      // Under the lock: the thread's Loop takes it first, so its handle is
      // in `threads` before it can leave.
      const int id = state_->next_id++;
      state_->threads.emplace(id, std::thread(&Tasks::Loop, state_, id, std::move(work)));
    }
  }
  for (std::thread& thread : done) thread.join();  // they have left Loop: at most a moment
}

void Tasks::Loop(std::shared_ptr<State> state, int id, std::function<void()> work) {
  absl::MutexLock lock(&state->mu);
  for (;;) {
    state->mu.Unlock();
    work();
    work = nullptr;  // what it captured goes now, not when the next piece comes
    state->mu.Lock();
    --state->running;
    if (state->stopping) break;
    Idle me;
    state->idle.push_back(&me);
    auto handed = [](Idle* idle) { return idle->work != nullptr || idle->stop; };
    if (!state->mu.AwaitWithTimeout(absl::Condition(+handed, &me), absl::Seconds(30))) {
      // Idle too long: leave, unless Run handed us work meanwhile (it does so
      // under the lock, taking us off the list in the same step).
      auto it = std::find(state->idle.begin(), state->idle.end(), &me);
      if (it != state->idle.end()) state->idle.erase(it);
    }
    if (me.work == nullptr) break;
    work = std::move(me.work);
  }
  // Our handle goes to whoever joins next (absent when ~Tasks, which ran
  // meanwhile, detached us).
  auto it = state->threads.find(id);
  if (it != state->threads.end()) {
    state->finished.push_back(std::move(it->second));
    state->threads.erase(it);
  }
}

bool Tasks::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&state_->mu);
  auto idle = [](State* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return s->running == 0; };
  return state_->mu.AwaitWithDeadline(absl::Condition(+idle, state_.get()), deadline);
}

int Tasks::running() const {
  absl::MutexLock lock(&state_->mu);
  return state_->running;
}

}  // namespace warden
