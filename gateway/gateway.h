// Gateway: warden-gateway as one object (docs/fleet.md). It serves the whole
// warden.v1 API - Executor, Agent, Node - and the HTTP fronts (MCP, E2B,
// the Kernel Gateway) exactly as wardend does, and is only a client of
// warden.v1 itself: every call goes to a node, chosen by the session it
// names (each session id ends with its node's id) or, for new work, by
// load (placement.h). It keeps nothing a restart would lose: the nodes come
// from DNS and their own answers, and where a moved session lives from the
// shared ledger the nodes keep (server/session_ledger.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/auth.h"
#include "common/metrics.h"
#include "fronts/host/http_fronts.h"
#include "gateway/gateway_options.h"
#include "gateway/node_directory.h"
#include "gateway/routes.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server.h"

namespace warden::gateway {

// Sessions that moved (handed over, taken over), by id: where they live
// now. A cache only: the nodes' ledger says the same to whoever asks.
class MovedSessions {
 public:
  explicit MovedSessions(size_t capacity) : capacity_(capacity) {}
  std::string Get(const std::string& session_id) const;
  void Put(const std::string& session_id, const std::string& node_id);
  void Forget(const std::string& session_id);

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> where_ ABSL_GUARDED_BY(mu_);
};

class Gateway {
 public:
  // `source` null: the one the options name (DNS or the static list).
  static absl::StatusOr<std::unique_ptr<Gateway>> Create(const GatewayOptions& options,
                                                         std::unique_ptr<NodeSource> source = nullptr);
  ~Gateway();

  absl::Status Start();
  // Stops accepting; calls in flight get until `grace`, then are cancelled.
  void Shutdown(absl::Duration grace);

  const std::vector<std::string>& listening() const { return listening_; }
  int http_port() const { return http_ ? http_->http_port() : 0; }
  int admin_port() const { return http_ ? http_->admin_port() : 0; }

  // For the calls (proxy_call.cc).
  const GatewayOptions& options() const { return options_; }
  NodeDirectory& nodes() { return *nodes_; }
  MovedSessions& moved() { return moved_; }
  const Route* RouteOf(const std::string& method) const;
  absl::StatusOr<std::string> TenantOf(const grpc::ServerContextBase& ctx) const;
  // The gateway's answer to GetNodeStatus: the fleet as one node.
  v1::NodeStatus FleetStatus() const;
  void Count(const Route& route, const char* outcome);
  void CountRetry(const char* why);

 private:
  explicit Gateway(const GatewayOptions& options) : options_(options), moved_(1 << 20) {}

  const GatewayOptions options_;
  std::unique_ptr<NodeDirectory> nodes_;
  std::map<std::string, Route> routes_;
  TokenTable tokens_;
  MovedSessions moved_;
  Metrics metrics_;
  CounterFamily* calls_ = nullptr;    // by method kind and outcome
  CounterFamily* retries_ = nullptr;  // placements retried, takeovers, redirects
  std::unique_ptr<grpc::CallbackGenericService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<fronts::HttpFronts> http_;
  std::vector<std::string> listening_;
  bool shut_down_ = false;
};

}  // namespace warden::gateway
