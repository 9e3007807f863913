// TenantStreams: the long-lived streams (server-sent events, NDJSON and
// Connect streams, WebSockets) each tenant holds open on the HTTP front,
// bounded per tenant, so that one tenant's streams cannot take the
// connections and handler threads every other tenant needs. A tenant at its
// cap gets RESOURCE_EXHAUSTED (429 in its protocol's shape) naming the
// setting; the others are unaffected.
//
// A response stream holds a handler thread while it lasts (a WebSocket
// holds none). However many tenants stream, such streams together take at
// most half of the handler threads: one more is UNAVAILABLE (503), so
// requests that are not streams always find threads. Of those stream
// threads, one tenant takes at most half of what is free (its first one
// whenever any is): past that it gets RESOURCE_EXHAUSTED (429), and the
// other half stays for everyone else, so one tenant at its limit leaves
// room for the next, and that one for the next.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace warden::http {

class TenantStreams : public std::enable_shared_from_this<TenantStreams> {
 public:
  // One open stream; the count drops when it is destroyed.
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

   private:
    friend class TenantStreams;
    Lease(std::shared_ptr<TenantStreams> owner, std::string tenant, bool holds_thread)
        : owner_(std::move(owner)), tenant_(std::move(tenant)), holds_thread_(holds_thread) {}
    const std::shared_ptr<TenantStreams> owner_;
    const std::string tenant_;
    const bool holds_thread_;
  };

  // `setting` names the cap in refusals ("http.max_streams_per_tenant");
  // `threads_setting` the handler threads ("http.handler_threads"), of which
  // streams that hold one take at most half (at least one).
  TenantStreams(int cap_per_tenant, std::string setting, int handler_threads, std::string threads_setting)
      : cap_(cap_per_tenant),
        setting_(std::move(setting)),
        thread_cap_(handler_threads / 2 > 0 ? handler_threads / 2 : 1),
        handler_threads_(handler_threads),
        threads_setting_(std::move(threads_setting)) {}

  // A lease for one more stream of `tenant` ("" for callers without one),
  // or RESOURCE_EXHAUSTED once it holds the cap. A stream that
  // `holds_thread` may also be UNAVAILABLE: such streams hold half of the
  // handler threads already.
  absl::StatusOr<std::unique_ptr<Lease>> Open(const std::string& tenant, bool holds_thread = false);
  int open(const std::string& tenant) const;
  int holding_threads() const;
  int holding_threads(const std::string& tenant) const;

 private:
  void Close(const std::string& tenant, bool holds_thread);

  const int cap_;
  const std::string setting_;
  const int thread_cap_;
  const int handler_threads_;
  const std::string threads_setting_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> open_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> threads_of_ ABSL_GUARDED_BY(mu_);  // streams holding a thread
  int holding_threads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace warden::http
