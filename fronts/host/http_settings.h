// HttpSettings: the `http` section of wardend's and warden-gateway's
// configuration, read and checked the same way by both (their HTTP fronts
// are one and the same, fronts/host/http_fronts.h): which hosts and web
// origins may call besides loopback ones (fronts/http/access_policy.h), and
// how many connections, streams and threads the front holds
// (fronts/http/server.h). docs/operations.md documents each key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config_reader.h"

namespace warden::fronts {

struct HttpSettings {
  // Host names (or name:port) a request's Host may give besides loopback
  // ones. Checked when there are no tokens, and whenever this is set (DNS
  // rebinding).
  std::vector<std::string> allowed_hosts;
  // Web origins ("https://app.example.com") that may call besides loopback
  // ones, with CORS; any other Origin is refused, tokens or not.
  std::vector<std::string> allowed_origins;
  // A request head must arrive within this (from connect, or from its
  // first byte on a kept-alive connection).
  int64_t head_timeout_ms = 10'000;
  // A kept-alive connection without a new request for this long is closed.
  int64_t idle_timeout_ms = 60'000;
  // Connections at once, WebSockets included; at the bound the ones waiting
  // longest for a request head make room. Lowered to fit RLIMIT_NOFILE.
  // 10,000 idle connections and real clients beside them fit.
  int64_t max_connections = 16'384;
  // Long-lived streams (event streams, NDJSON, WebSockets) per tenant.
  int64_t max_streams_per_tenant = 256;
  // I/O threads (0: one per core) and the most threads for handlers that
  // block on the engine.
  int64_t io_threads = 0;
  int64_t handler_threads = 512;
  // Request bodies held in memory at once, all connections together (MiB);
  // one more body is answered 503 before it is read.
  int64_t max_body_memory_mb = 1024;
  // The key E2B access tokens are sealed with (fronts/e2b/access_token.h):
  // a file of 32 bytes or 64 hex digits that every gateway of a fleet
  // shares, so that a sandbox's token outlives a restart and works through
  // any of them. Empty: a random key per start.
  std::string e2b_key_file;
  // The longest an E2B signed file URL (downloadUrl, uploadUrl with
  // useSignatureExpiration) may still be valid when it is used: one whose
  // expiration lies further ahead is refused (E2B sets no bound). A URL
  // without an expiration lives as long as its sandbox, as in E2B.
  int64_t e2b_signed_url_max_seconds = 86'400;
  // Exposed ports (docs/api.md "Exposed ports"): requests whose Host is
  // <port>-<session id>.<sandbox_domain> go to that port of the session's
  // sandbox (also /ports/<session id>/<port>/... on any Host). Empty: only
  // the path form. E2B's SDKs build the same names (getHost).
  std::string sandbox_domain;
  // Sessions may let their ports be reached without any token (E2B's
  // allowPublicTraffic); off, a token is always needed.
  bool allow_public_ports = false;
};

// Reads the keys of the `http` object (the caller opens it).
void ReadHttpSettings(config::ObjectReader& r, HttpSettings* out);
// Adds a problem, naming the key ("http.max_connections"), for each value
// out of range and each host or origin that cannot be matched.
void CheckHttpSettings(const HttpSettings& settings, config::Problems& problems);

}  // namespace warden::fronts
