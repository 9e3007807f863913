// GatewayOptions: warden-gateway's configuration (docs/fleet.md), a JSON
// file read as strictly as wardend's (common/config_reader.h). The keys a
// gateway shares with wardend (listen, tls, auth, http_listen, http, limits
// of what the HTTP fronts accept) mean the same: clients cannot tell the two
// apart. The rest says where the nodes are and how to reach them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fronts/host/http_settings.h"

namespace warden::gateway {

struct NodesOptions {
  // Discovery, one of: a DNS name every node's address is a record of (a
  // Kubernetes headless Service, Swarm's tasks.<service>), resolved anew
  // every resolve_interval_ms...
  std::string dns;
  // ...or a fixed list of HOST:PORT.
  std::vector<std::string> addresses;
  int port = 50051;  // with dns: the port every node's gRPC listens on
  int64_t resolve_interval_ms = 2'000;
  // Each node is asked for its status this often, each ask failing after
  // poll_timeout_ms; after `down_after` failed asks in a row with nothing
  // heard from the node meanwhile (or a refused connection) it is down:
  // its sessions fail fast and new work goes elsewhere (liveness.h). A
  // node cut off is noticed within poll_timeout_ms + down_after *
  // poll_interval_ms of the last thing it said: 2.5 s by default, against
  // the goal of 5 s; a node must stay silent for poll_timeout_ms +
  // (down_after - 1) * poll_interval_ms (2 s) to be taken for lost.
  int64_t poll_interval_ms = 500;
  int64_t poll_timeout_ms = 1'000;
  int down_after = 3;
  // The gateway's client certificate for mutual TLS to the nodes (only the
  // gateway holds it: nodes accept forwarded tenants from it alone), and
  // the CA the nodes' server certificates chain to. `server_name`: the name
  // node certificates carry (they are reached by address).
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  std::string server_name;
};

struct PlacementOptions {
  int choices = 2;  // best of this many random nodes (the "power of K choices")
  int max_attempts = 3;  // nodes a refused one-shot or new session is tried on
  // A session whose node drains: how long a call waits for it to be
  // handed over before it fails UNAVAILABLE.
  int64_t handover_wait_ms = 30'000;
};

struct GatewayTlsOptions {
  std::string cert_file;  // PEM; a TCP listener off loopback needs them
  std::string key_file;
};

struct GatewayOptions {
  std::vector<std::string> listen = {"127.0.0.1:50151"};
  bool allow_insecure_loopback = false;
  std::string http_listen;   // the HTTP fronts (MCP, E2B, Kernel Gateway), as wardend's
  std::string admin_listen;  // /metrics, /healthz, /readyz alone
  // The `http` section, as wardend's: hosts and origins that may call, the
  // HTTP front's connections, streams and threads.
  fronts::HttpSettings http;
  GatewayTlsOptions tls;
  std::string tokens_file;  // auth.tokens_file: the same tokens as the nodes'
  int64_t max_code_bytes = 1 << 20;   // limits.* of the nodes, for the HTTP fronts' bounds
  int64_t max_file_bytes = 64LL << 20;
  NodesOptions nodes;
  PlacementOptions placement;
  std::string log_level = "info";  // trace | debug | info | warn | error

  static absl::StatusOr<GatewayOptions> FromFile(const std::string& path);
  absl::Status Validate() const;
};

}  // namespace warden::gateway
