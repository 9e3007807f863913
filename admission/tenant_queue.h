// TenantQueue: turns to run, fair between tenants. Each tenant may hold
// `max_running_per_tenant` turns at once and all tenants together
// `max_running`; a request over either limit waits in its tenant's line
// (a FairLine: no thread waits) instead of being refused. When a turn ends,
// the tenants with someone waiting are served in turn (round robin), so
// one tenant's burst of hundreds cannot starve another tenant's single
// request. Every waiter keeps its own deadline. Refused at once, saying
// when to retry: a full line (`max_waiting_per_tenant`), and a request the
// line ahead of it would keep waiting past its deadline, at the rate the
// tenant's turns have been ending (ServiceTime). The engine holds two:
// executions (a turn for each cell), and starts of sandboxes that no warm
// pool holds (a turn for each start, `max_running` of them at once).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "admission/fair_line.h"
#include "admission/service_time.h"

namespace warden {

struct TenantQueueOptions {
  int max_running_per_tenant = 16;
  int max_running = 0;  // all tenants together; 0: no limit but the tenants'
  int max_waiting_per_tenant = 1024;
  // What a turn is, for the messages: "you run 16 executions at once".
  std::string noun = "executions";
  // The config keys of the limits, for the messages (what to raise).
  std::string waiting_key = "queue.max_waiting_per_tenant";
};

struct TenantQueueStats {
  int running = 0;
  int waiting = 0;
  int64_t admitted = 0;
  int64_t queued = 0;     // admissions that had to wait
  int64_t refused = 0;    // a full line
  int64_t too_late = 0;   // refused at once: the line would keep them past their deadline
  int64_t timed_out = 0;  // their deadline came while they waited
  double turns_per_s = 0;  // turns ending per second lately, all tenants (an estimate)
};

class TenantQueue {
 public:
  explicit TenantQueue(TenantQueueOptions options);
  // Stop(); every Slot must have been released (destroyed) before.
  ~TenantQueue();

  // A turn: ends itself (and admits the next waiter) when destroyed.
  // Move-only.
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

  using Admitted = absl::AnyInvocable<void(absl::StatusOr<Slot>) &&>;

  // A turn for `tenant`, now or once it comes: `admitted` is called once,
  // with the Slot, or with RESOURCE_EXHAUSTED (a full line, a turn that would
  // come past `deadline`: both at once; or `deadline` reached) or UNAVAILABLE
  // (after Stop). It runs on this thread when the answer is immediate, else
  // on the thread that ended a turn or on the queue's deadline thread: it
  // must not block.
  void EnterAsync(const std::string& tenant, absl::Time deadline, Admitted admitted);
  // The same, waiting on this thread.
  absl::StatusOr<Slot> Enter(const std::string& tenant, absl::Time deadline);
  // Refuses every waiter with UNAVAILABLE; later Enter calls fail.
  // Idempotent.
  void Stop();

  TenantQueueStats Stats() const;
  // What one tenant runs now, and how many of its requests wait.
  std::pair<int, int> TenantLoad(const std::string& tenant) const;

 private:
  struct Tenant {
    int running = 0;
    // How long this tenant's turns last lately (its own, from the queue's
    // mean when it first came).
    ServiceTime hold;
  };
  using Line = FairLine<Admitted>;

  void Leave(const std::string& tenant, absl::Duration held);
  // Admits waiters while there is room, one tenant after the other; the
  // caller answers them once the lock is released.
  std::vector<Line::Taken> AdmitWaiters() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasRoom(const Tenant& t) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Turns a tenant gets at once: its own limit, or its share of the
  // server's when that binds.
  int Servers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(const std::string& tenant) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Refuses waiters whose deadline passed, until Stop.
  void ExpireLoop();
  void Answer(std::vector<Line::Taken> admitted);

  const TenantQueueOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Tenant> tenants_ ABSL_GUARDED_BY(mu_);  // with turns running or waiting
  Line line_ ABSL_GUARDED_BY(mu_);
  TenantQueueStats stats_ ABSL_GUARDED_BY(mu_);
  ServiceTime hold_ ABSL_GUARDED_BY(mu_){absl::Milliseconds(100)};  // all tenants'
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread expirer_;
};

}  // namespace warden
