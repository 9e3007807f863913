// PathWatchers: polled directory watches (warden.v1's CreateWatcher,
// GetWatcherEvents, RemoveWatcher; E2B envd's polled watcher, which the
// synchronous Python SDK's files.watch_dir uses).
//
// Each watcher is one WatchPath watch (server/path_watch.h: warden-watch
// inside the session's machine) run on a thread of its own, its events kept
// here until they are asked for. Bounded per session (max_per_session
// watchers, max_events waiting each); a watcher ends with its session (the
// machine and its warden-watch go), when removed, or at Stop. Watchers live
// in this process: after a restart of wardend, or a session's move to
// another node, they are unknown (NOT_FOUND), as envd's are after a
// sandbox's cold start.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "warden/v1/executor.pb.h"

namespace warden {

class Engine;

struct PathWatcherLimits {
  int max_per_session = 16;
  // Events waiting to be fetched: per watcher as many as inotify's own
  // queue holds by default (fs.inotify.max_queued_events), and in bytes
  // for all of a session's watchers together (what the daemon's memory
  // holds for it). A watcher past either stops.
  size_t max_events = 16384;
  int64_t max_session_bytes = 8 << 20;
  absl::Duration start_timeout = absl::Seconds(30);  // for warden-watch to say READY
};

class PathWatchers {
 public:
  // Runs a long piece of work on a thread of its own (the service's Tasks).
  using Run = std::function<void(std::function<void()>)>;

  // `engine` is not owned and outlives this object.
  PathWatchers(Engine& engine, Run run, PathWatcherLimits limits = {});
  ~PathWatchers();

  // Starts a watch; returns its id once it is in place.
  absl::StatusOr<std::string> Create(const std::string& tenant, const v1::CreateWatcherRequest& request);
  // The events since the previous call. A watcher that failed hands over
  // what it kept, then answers its failure; one whose directory went,
  // FAILED_PRECONDITION saying so.
  absl::Status TakeEvents(const std::string& tenant, const v1::GetWatcherEventsRequest& request,
                          v1::GetWatcherEventsResponse* response);
  absl::Status Remove(const std::string& tenant, const v1::RemoveWatcherRequest& request);
  // Ends every watch and waits for their threads (wardend's shutdown,
  // before the engine stops), and refuses new ones.
  void Stop();

  int size() const;

 private:
  struct Watcher;
  absl::StatusOr<std::shared_ptr<Watcher>> Find(const std::string& tenant, const std::string& session_id,
                                                const std::string& watcher_id) const;
  // A watch that ended: forgotten when its session went with it.
  void Ended(const std::shared_ptr<Watcher>& watcher);

  Engine& engine_;
  const Run run_;
  const PathWatcherLimits limits_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Watcher>> watchers_ ABSL_GUARDED_BY(mu_);  // by id
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // watch threads not yet ended
};

}  // namespace warden
