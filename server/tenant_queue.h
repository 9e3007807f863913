// TenantQueue: admission of executions, fair between tenants. Each tenant
// may run `max_running_per_tenant` executions at once and the server
// `max_running` in all; a request over either limit waits in its tenant's
// line instead of being refused. When a slot frees, the tenants with
// someone waiting are served in turn (round robin), so one tenant's burst of
// hundreds cannot starve another tenant's single request. Every waiter keeps
// its own deadline; only a full line (`max_waiting_per_tenant`) is refused
// at once, with a hint of when to retry.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace warden {

struct TenantQueueOptions {
  int max_running_per_tenant = 16;
  int max_running = 0;  // all tenants together; 0: no limit but the tenants'
  int max_waiting_per_tenant = 1024;
};

struct TenantQueueStats {
  int running = 0;
  int waiting = 0;
  int64_t admitted = 0;
  int64_t queued = 0;    // admissions that had to wait
  int64_t refused = 0;   // a full line
  int64_t timed_out = 0;
};

class TenantQueue {
 public:
  explicit TenantQueue(TenantQueueOptions options);
  // Every Slot must have been released (destroyed) before.
  ~TenantQueue();

  // A place to run: releases itself (and admits the next waiter) when
  // destroyed. Move-only.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept
        : queue_(other.queue_), tenant_(std::move(other.tenant_)), since_(other.since_) {
      other.queue_ = nullptr;
    }
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }
    void Release();

   private:
    friend class TenantQueue;
    Slot(TenantQueue* queue, std::string tenant)
        : queue_(queue), tenant_(std::move(tenant)), since_(absl::Now()) {}
    TenantQueue* queue_ = nullptr;  // not owned
    std::string tenant_;
    absl::Time since_;
  };

  // A slot for `tenant` now, or once its turn comes. RESOURCE_EXHAUSTED at
  // once when the tenant's line is full, or at `deadline` if its turn has not
  // come (both say when to retry); UNAVAILABLE after Stop().
  absl::StatusOr<Slot> Enter(const std::string& tenant, absl::Time deadline);
  // Wakes every waiter with UNAVAILABLE; later Enter calls fail.
  void Stop();

  TenantQueueStats Stats() const;
  // What one tenant runs now, and how many of its requests wait.
  std::pair<int, int> TenantLoad(const std::string& tenant) const;

 private:
  struct Waiter {
    bool admitted = false;
  };
  struct Tenant {
    int running = 0;
    std::deque<Waiter*> waiting;  // oldest first; not owned (on their callers' stacks)
  };

  void Leave(const std::string& tenant, absl::Duration held);
  // Admits waiters while there is room, one tenant after the other.
  void AdmitWaiters() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasRoom(const Tenant& t) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Milliseconds a slot is held on average lately, for the retry hint.
  int64_t RetryHintMs() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TenantQueueOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Tenant> tenants_ ABSL_GUARDED_BY(mu_);  // with work running or waiting
  // The tenant served last; the next turn goes to the one after it.
  std::string turn_ ABSL_GUARDED_BY(mu_);
  TenantQueueStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Duration mean_hold_ ABSL_GUARDED_BY(mu_) = absl::Milliseconds(100);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace warden
