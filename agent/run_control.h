// RunControl: one agent run's cancellation, shared by the thread that drives
// the run and whoever may stop it (the RPC's cancellation). Work that blocks
// (an HTTP request, a cell, a wait for the client's answer) registers a hook
// that makes it return early; waits are interruptible.
#pragma once

#include <functional>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace warden::agent {

class RunControl {
 public:
  // Idempotent; runs every registered hook once, outside the lock.
  void Cancel();
  bool cancelled() const;

  // Runs `hook` on Cancel() (at once if already cancelled). Returns an id
  // for RemoveHook; the hook must stay callable until it is removed.
  int AddHook(std::function<void()> hook);
  void RemoveHook(int id);

  // Sleeps up to `duration`; returns false if cancelled meanwhile.
  bool SleepFor(absl::Duration duration);

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, std::function<void()>> hooks_ ABSL_GUARDED_BY(mu_);
};

// Registers a hook for the scope's lifetime.
class ScopedCancelHook {
 public:
  ScopedCancelHook(RunControl* control, std::function<void()> hook)
      : control_(control), id_(control ? control->AddHook(std::move(hook)) : -1) {}
  ~ScopedCancelHook() {
    if (control_) control_->RemoveHook(id_);
  }
  ScopedCancelHook(const ScopedCancelHook&) = delete;
  ScopedCancelHook& operator=(const ScopedCancelHook&) = delete;

 private:
  RunControl* control_;
  int id_;
};

}  // namespace warden::agent
