#include "server/path_watchers.h"

#include <atomic>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "server/engine.h"
#include "server/path_watch.h"
#include "server/session_manager.h"

namespace warden {

struct PathWatchers::Watcher {
  ~Watcher() { session_bytes->fetch_sub(bytes); }

  std::string id;
  std::string tenant;
  std::string session_id;
  std::string path;
  bool include_entry = false;
  // The bytes of events waiting, of all the session's watchers (shared by them).
  std::shared_ptr<std::atomic<int64_t>> session_bytes;
  Cancellation cancellation;
  absl::Notification started;  // the watch is in place, or it never will be (`end` says why)

  absl::Mutex mu;
  bool in_place ABSL_GUARDED_BY(mu) = false;  // warden-watch said READY
  std::vector<v1::WatchEvent> events ABSL_GUARDED_BY(mu);
  int64_t bytes ABSL_GUARDED_BY(mu) = 0;  // of `events`, counted in session_bytes
  // Set once the watch has stopped: OK when its directory went (or it was
  // cancelled), else why it failed. Its events are handed over first.
  std::optional<absl::Status> end ABSL_GUARDED_BY(mu);
};

PathWatchers::PathWatchers(Engine& engine, Run run, PathWatcherLimits limits)
    : engine_(engine), run_(std::move(run)), limits_(limits) {}

PathWatchers::~PathWatchers() { Stop(); }

absl::StatusOr<std::string> PathWatchers::Create(const std::string& tenant,
                                                  const v1::CreateWatcherRequest& request) {
  // The session must exist and be the caller's (also checked by the watch).
  if (auto session = engine_.GetSession(tenant, request.session_id()); !session.ok()) return session.status();
  auto watcher = std::make_shared<Watcher>();
  watcher->id = absl::StrCat("w", SessionManager::RandomHex());
  watcher->tenant = tenant;
  watcher->session_id = request.session_id();
  watcher->path = request.path();
  watcher->include_entry = request.include_entry();
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::UnavailableError("wardend is shutting down");
    int held = 0;
    for (const auto& [id, w] : watchers_) {
      if (w->tenant != tenant || w->session_id != request.session_id()) continue;
      ++held;
      watcher->session_bytes = w->session_bytes;
    }
    if (!watcher->session_bytes) watcher->session_bytes = std::make_shared<std::atomic<int64_t>>(0);
    if (held >= limits_.max_per_session) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "session ", request.session_id(), " already holds ", held,
          " directory watchers, its maximum: remove one (RemoveWatcher, E2B: handle.stop()) first"));
    }
    watchers_[watcher->id] = watcher;
    ++running_;
  }
  v1::WatchPathRequest watch;
  watch.set_session_id(request.session_id());
  watch.set_path(request.path());
  watch.set_recursive(request.recursive());
  run_([this, watcher, watch] {
    const size_t max_events = limits_.max_events;
    const int64_t max_bytes = limits_.max_session_bytes;
    absl::Status status = WatchSessionPath(engine_, watcher->tenant, watch, watcher->cancellation,
                                           [&watcher, max_events, max_bytes](v1::WatchEvent event) {
      if (event.started()) {
        {
          absl::MutexLock lock(&watcher->mu);
          watcher->in_place = true;
        }
        watcher->started.Notify();
        return;
      }
      absl::MutexLock lock(&watcher->mu);
      if (watcher->end) return;  // failed already: the rest is not kept
      const int64_t size = static_cast<int64_t>(sizeof(v1::WatchEvent) + event.ByteSizeLong());
      const bool full = watcher->events.size() >= max_events;
      if (full || watcher->session_bytes->fetch_add(size) + size > max_bytes) {
        if (!full) watcher->session_bytes->fetch_sub(size);
        watcher->end = absl::ResourceExhaustedError(absl::StrCat(
            full ? absl::StrCat("more than ", max_events, " events of ", watcher->path)
                 : absl::StrCat("more than ", max_bytes >> 20, " MiB of events of the session's watchers"),
            " waited to be fetched, and the watcher of ", watcher->path,
            " stopped: fetch them more often, or watch a smaller tree; remove this watcher and create another"));
        watcher->cancellation.Cancel();
        return;
      }
      watcher->bytes += size;
      watcher->events.push_back(std::move(event));
    }, /*with_entries=*/watcher->include_entry);
    {
      absl::MutexLock lock(&watcher->mu);
      if (!watcher->end) {
        watcher->end = status.ok() && !watcher->cancellation.cancelled()
                           ? absl::FailedPreconditionError(absl::StrCat(
                                 "the watched directory ", watcher->path, " is gone: the watcher stopped"))
                           : status;
      }
    }
    if (!watcher->started.HasBeenNotified()) watcher->started.Notify();
    Ended(watcher);
    absl::MutexLock lock(&mu_);
    --running_;  // the last this thread does with `this`
  });
  const bool in_time = watcher->started.WaitForNotificationWithTimeout(limits_.start_timeout);
  absl::Status failed;
  {
    absl::MutexLock lock(&watcher->mu);
    if (!in_time) {
      failed = absl::DeadlineExceededError("the directory watcher did not start in time; try again");
    } else if (!watcher->in_place) {
      // It could not start (no such directory, not one, the session went).
      failed = watcher->end && !watcher->end->ok() ? *watcher->end : absl::UnavailableError("wardend is shutting down");
    }
  }
  if (!failed.ok()) {
    watcher->cancellation.Cancel();
    absl::MutexLock lock(&mu_);
    watchers_.erase(watcher->id);
    return failed;
  }
  return watcher->id;
}

absl::StatusOr<std::shared_ptr<PathWatchers::Watcher>> PathWatchers::Find(const std::string& tenant,
                                                                           const std::string& session_id,
                                                                           const std::string& watcher_id) const {
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(watcher_id);
  // Another tenant's or session's watcher is unknown, like one that never was.
  if (it == watchers_.end() || it->second->tenant != tenant || it->second->session_id != session_id) {
    return absl::NotFoundError(absl::StrCat("watcher with id ", watcher_id, " not found in session ", session_id,
                                            ": it was removed, its session ended, or wardend restarted"));
  }
  return it->second;
}

absl::Status PathWatchers::TakeEvents(const std::string& tenant, const v1::GetWatcherEventsRequest& request,
                                      v1::GetWatcherEventsResponse* response) {
  // A session that ended takes its watchers with it.
  if (auto session = engine_.GetSession(tenant, request.session_id()); !session.ok()) return session.status();
  absl::StatusOr<std::shared_ptr<Watcher>> watcher = Find(tenant, request.session_id(), request.watcher_id());
  if (!watcher.ok()) return watcher.status();
  absl::MutexLock lock(&(*watcher)->mu);
  if ((*watcher)->events.empty() && (*watcher)->end) return *(*watcher)->end;
  for (v1::WatchEvent& event : (*watcher)->events) *response->add_events() = std::move(event);
  (*watcher)->events.clear();
  (*watcher)->session_bytes->fetch_sub((*watcher)->bytes);
  (*watcher)->bytes = 0;
  return absl::OkStatus();
}

absl::Status PathWatchers::Remove(const std::string& tenant, const v1::RemoveWatcherRequest& request) {
  absl::StatusOr<std::shared_ptr<Watcher>> watcher = Find(tenant, request.session_id(), request.watcher_id());
  if (!watcher.ok()) return watcher.status();
  (*watcher)->cancellation.Cancel();
  absl::MutexLock lock(&mu_);
  watchers_.erase(request.watcher_id());
  return absl::OkStatus();
}

void PathWatchers::Ended(const std::shared_ptr<Watcher>& watcher) {
  if (engine_.GetSession(watcher->tenant, watcher->session_id).ok()) return;  // kept until removed
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher->id);
}

void PathWatchers::Stop() {
  std::map<std::string, std::shared_ptr<Watcher>> watchers;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    watchers.swap(watchers_);
  }
  for (const auto& [id, watcher] : watchers) watcher->cancellation.Cancel();
  // A cancelled watch returns at once (its wake-up fd): wait for the threads,
  // which use the engine, before it goes.
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ == 0; };
  mu_.AwaitWithTimeout(absl::Condition(&idle), absl::Seconds(10));
}

int PathWatchers::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(watchers_.size());
}

}  // namespace warden
