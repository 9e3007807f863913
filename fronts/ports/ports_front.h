// Exposed ports on the HTTP front: a server a session runs on its own
// loopback, reached from outside (E2B's getHost, a preview URL), through
// warden.v1's ConnectPort and nothing else - a translation like every front,
// knowing nothing of the engine.
//
//   Host: <port>-<session id>.<sandbox_domain>    every method and path
//   /ports/<session id>/<port>/<path>             the same, on any Host (for
//                                                  setups without wildcard DNS;
//                                                  the server sees /<path>)
//
// Who may: the tenant's token (Authorization: Bearer), the session's traffic
// token (X-Warden-Traffic-Token), E2B's (e2b-traffic-access-token: its
// access token, or the session's traffic token), or anyone when the session's
// ports are public. The credential used is not passed on; every other header
// is. The request goes on as the client sent it but for its Host (the
// session's host_header, E2B's maskRequestHost), its path (the path form's
// prefix gone) and "Connection: close"; then the bytes flow both ways as they
// come (streaming answers, WebSockets after an Upgrade) until either side
// closes. Errors are JSON {"code", "message", "sandboxId"} (E2B's proxy's
// shape): 502 "The sandbox was not found" for a session that is gone or
// never was, 403 without a credential that lets the caller in, 502 when
// nothing listens on the port.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "fronts/http/router.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden::ports {

struct PortsOptions {
  // The domain whose <port>-<id> names are exposed ports; empty: the path
  // form only.
  std::string sandbox_domain;
  // E2B's traffic token is its sandbox's access token (fronts/e2b): the API
  // key it carries, if it was made for `session_id`.
  std::function<std::optional<std::string>(const std::string& session_id, const std::string& token)> open_e2b_token;
  absl::Duration open_timeout = absl::Seconds(20);  // waking a session included
};

// `executor` is not owned and outlives the router's use.
void AddPortRoutes(http::Router& router, v1::Executor::StubInterface* executor, PortsOptions options);

// "<port>-<id>.<domain>" -> (id, port), for a Host header (a port after
// the name allowed); false for any other Host.
bool ParsePortHost(absl::string_view host, const std::string& domain, std::string* session_id, int* port);

}  // namespace warden::ports
