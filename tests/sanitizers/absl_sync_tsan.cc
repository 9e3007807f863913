// ThreadSanitizer's view of Debian's Abseil synchronisation (the TSan build
// only: `make test-tsan`, docs/security.md "Sanitizers").
//
// Debian's libabsl_synchronization is built without TSan, and absl::Mutex,
// absl::CondVar and absl::Notification synchronise through atomics and futex
// calls inside it that TSan neither sees nor intercepts. Without help every
// access guarded by an absl::Mutex, in our code and in gRPC's (which locks
// absl::Mutex too), reads as a data race. Abseil's own TSan build annotates
// these calls; this file does the same from outside: it defines the
// out-of-line entry points in the executable, which the dynamic linker then
// prefers for every caller (our code, libgrpc, libabsl itself; the TSan build
// links with --export-dynamic), and each one calls the library's
// implementation (dlsym RTLD_NEXT) wrapped in the happens-before edges the
// call implies:
//   lock-like calls     -> __tsan_acquire(mutex) once the lock is held;
//   unlock-like calls   -> __tsan_release(mutex) before it is given up;
//   Await / CondVar waits release, then acquire once the lock is held again;
//   Notification        -> release before Notify, acquire after a wait that
//                          saw it (HasBeenNotified is an inline acquire load
//                          of the same flag, which TSan sees in our code).
// The library evaluates Conditions under the lock but out of our sight: in
// the waiter while it takes the lock (before our acquire), and in whichever
// thread unlocks or waits (after our release), for every waiter. Their reads
// are ignored inside those calls (AnnotateIgnoreReads; a Condition only
// reads), as Abseil's own annotations treat them. Lock-order (deadlock)
// checks are not modelled: only the edges.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);

namespace {

// The library's own definition of `mangled`, found once.
template <typename F>
F Next(const char* mangled) {
  void* f = dlsym(RTLD_NEXT, mangled);
  if (f == nullptr) {
    fprintf(stderr, "absl_sync_tsan: %s is not in libabsl_synchronization (%s)\n", mangled,
            dlerror());
    abort();
  }
  return reinterpret_cast<F>(f);
}

// Mangled names in Debian's inline namespace (absl::debian3).
#define ABSL_NS "N4absl7debian3"
#define REAL(Type, mangled) static const auto real = Next<Type>(mangled)

// Reads made while a Condition is evaluated inside the library.
struct IgnoreReads {
  IgnoreReads() { AnnotateIgnoreReadsBegin(__FILE__, __LINE__); }
  ~IgnoreReads() { AnnotateIgnoreReadsEnd(__FILE__, __LINE__); }
};

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  REAL(void (*)(Mutex*), "_Z" ABSL_NS "5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  REAL(void (*)(Mutex*), "_Z" ABSL_NS "5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  REAL(bool (*)(Mutex*), "_Z" ABSL_NS "5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  REAL(bool (*)(Mutex*), "_Z" ABSL_NS "5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  REAL(void (*)(Mutex*), "_Z" ABSL_NS "5Mutex6UnlockEv");
  __tsan_release(this);
  IgnoreReads ignore;  // waiters' Conditions
  real(this);
}

void Mutex::ReaderUnlock() {
  REAL(void (*)(Mutex*), "_Z" ABSL_NS "5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  IgnoreReads ignore;  // waiters' Conditions
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&), "_Z" ABSL_NS "5Mutex8LockWhenERKNS0_9ConditionE");
  {
    IgnoreReads ignore;
    real(this, cond);
  }
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&),
       "_Z" ABSL_NS "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  {
    IgnoreReads ignore;
    real(this, cond);
  }
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
       "_Z" ABSL_NS "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, timeout);
  }
  __tsan_acquire(this);  // held either way
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
       "_Z" ABSL_NS "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, timeout);
  }
  __tsan_acquire(this);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Time),
       "_Z" ABSL_NS "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, deadline);
  }
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Time),
       "_Z" ABSL_NS "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, deadline);
  }
  __tsan_acquire(this);
  return met;
}

void Mutex::Await(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&), "_Z" ABSL_NS "5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  {
    IgnoreReads ignore;
    real(this, cond);
  }
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
       "_Z" ABSL_NS "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, timeout);
  }
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Time),
       "_Z" ABSL_NS "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  bool met;
  {
    IgnoreReads ignore;
    met = real(this, cond, deadline);
  }
  __tsan_acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  REAL(void (*)(CondVar*, Mutex*), "_Z" ABSL_NS "7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  {
    IgnoreReads ignore;  // waiters' Conditions, as the lock is given up
    real(this, mu);
  }
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  REAL(bool (*)(CondVar*, Mutex*, absl::Duration),
       "_Z" ABSL_NS "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  bool timed_out;
  {
    IgnoreReads ignore;
    timed_out = real(this, mu, timeout);
  }
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  REAL(bool (*)(CondVar*, Mutex*, absl::Time),
       "_Z" ABSL_NS "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  bool timed_out;
  {
    IgnoreReads ignore;
    timed_out = real(this, mu, deadline);
  }
  __tsan_acquire(mu);
  return timed_out;
}

void Notification::Notify() {
  REAL(void (*)(Notification*), "_Z" ABSL_NS "12Notification6NotifyEv");
  __tsan_release(&notified_yet_);
  real(this);
}

void Notification::WaitForNotification() const {
  REAL(void (*)(const Notification*), "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<std::atomic<bool>*>(&notified_yet_));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  REAL(bool (*)(const Notification*, absl::Duration),
       "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<std::atomic<bool>*>(&notified_yet_));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  REAL(bool (*)(const Notification*, absl::Time),
       "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<std::atomic<bool>*>(&notified_yet_));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
