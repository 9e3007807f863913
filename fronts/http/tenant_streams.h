// TenantStreams: the long-lived streams (server-sent events, NDJSON and
// Connect streams, WebSockets) each tenant holds open on the HTTP front,
// bounded per tenant, so that one tenant's streams cannot take the
// connections and handler threads every other tenant needs. A tenant at its
// cap gets RESOURCE_EXHAUSTED (429 in its protocol's shape) naming the
// setting; the others are unaffected.
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
    Lease(std::shared_ptr<TenantStreams> owner, std::string tenant)
        : owner_(std::move(owner)), tenant_(std::move(tenant)) {}
    const std::shared_ptr<TenantStreams> owner_;
    const std::string tenant_;
  };

  // `setting` names the cap in refusals ("http.max_streams_per_tenant").
  TenantStreams(int cap_per_tenant, std::string setting) : cap_(cap_per_tenant), setting_(std::move(setting)) {}

  // A lease for one more stream of `tenant` ("" for callers without one),
  // or RESOURCE_EXHAUSTED once it holds the cap.
  absl::StatusOr<std::unique_ptr<Lease>> Open(const std::string& tenant);
  int open(const std::string& tenant) const;

 private:
  void Close(const std::string& tenant);

  const int cap_;
  const std::string setting_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace warden::http
