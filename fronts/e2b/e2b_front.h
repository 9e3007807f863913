// The E2B sandbox API on the HTTP front, as a translation to warden.v1:
// unmodified E2B SDKs (and everything built on them) run on Warden with
// E2B_API_URL and E2B_SANDBOX_URL both pointing at the front.
//
// Control plane (X-API-KEY is the caller's Warden token, so it maps to the
// same tenant as on gRPC):
//   POST /sandboxes, /v2/sandboxes        create: 201 {sandboxID, envdAccessToken, ...}
//   GET  /v2/sandboxes                    list with E2B's query, a page at a time
//                                         (sandbox_list.h); GET /sandboxes: the running ones
//   GET  /sandboxes/{id}                  one;  GET /sandboxes/{id}/metrics, /sandboxes/metrics
//   DELETE /sandboxes/{id}                kill (204)
//   POST /sandboxes/{id}/timeout          set the TTL from now (204; 0: it ends now)
//   POST /sandboxes/{id}/connect, /v2/... connect (200, or 201 when it resumed), extending the TTL
//   POST /sandboxes/{id}/refreshes        keep alive (204)
//   POST /sandboxes/{id}/pause, /resume, /snapshots, /fork; GET /snapshots; DELETE /templates/{id}
// Each answers with the status codes and bodies E2B's OpenAPI spec names
// for it (tests/python_package/frameworks/test_e2b_python_sdk.py walks them
// with the Python SDK's generated client).
// Sandbox plane (the sandbox is named by the E2b-Sandbox-Id header):
//   POST /execute                          NDJSON stream (execution_lines.h)
//   POST|GET /contexts, POST /contexts/{id}/restart, DELETE /contexts/{id}
//   GET|POST /files?path=                  raw bytes out; multipart or octet-stream in
//   GET /health                            204
//
// An E2B sandbox is one Warden session with a shared workspace (docs/api.md):
// its Python interpreter is the default context; other languages get a
// context of their own on first use; /home/user is the workspace. The
// sandbox id is the session id. Every sandbox-plane and envd route needs
// the sandbox's access token, the envdAccessToken handed out at create or
// connect (also returned as trafficAccessToken): X-Access-Token, or
// E2B-Traffic-Access-Token, which the code interpreter SDK sends on its
// contexts calls instead. The token carries the X-API-KEY that created or
// connected the sandbox, sealed for that sandbox (access_token.h); a
// missing or wrong one gets the same 404 as an unknown sandbox. The front
// then calls warden.v1 with that key. Sandboxes created through another
// front or gRPC are reached after a connect.
//
// The front keeps no state a restart would lose: the access token carries
// the key, the session's labels carry the template, metadata and
// autoResume (e2b.*), and the rest is a cache rebuilt from warden.v1
// (contexts, the last metrics sample, the tokens a signed URL is checked
// against). Fronts that share E2bOptions::access_key (warden-gateways of a
// fleet, or one wardend across restarts) accept each other's tokens.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "fronts/http/router.h"
#include "fronts/http/server.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden::e2b {

struct E2bOptions {
  // The one template Warden serves; others are refused, naming it.
  std::string template_id = "code-interpreter-v1";
  // The envd version reported to SDKs: the features they may use.
  std::string envd_version = "0.6.4";
  int64_t default_timeout_seconds = 300;  // E2B's default sandbox lifetime
  // How often a quiet /execute stream gets a keepalive line (E2B's server
  // sends one every 5 s): a client that left is noticed at the next one.
  absl::Duration keepalive = absl::Seconds(1);
  size_t max_body_bytes = 96 << 20;
  // The most one file may hold (limits.max_file_bytes): where a gzip'ed
  // upload of one file stops inflating.
  int64_t max_file_bytes = 64 << 20;
  // A signed file URL whose expiration lies further ahead than this is
  // refused (http.e2b_signed_url_max_seconds).
  absl::Duration max_signed_url = absl::Hours(24);
  // The key access tokens are sealed with (AccessTokens::kKeyBytes bytes,
  // http.e2b_key_file); empty: a random one, so tokens die with the process.
  std::string access_key;
  // The tenant of an API key (as the server's authentication): a sandbox
  // plane request counts as its access token's key's tenant, and a key no
  // longer accepted revokes the tokens made for it.
  http::Authenticate authenticate;
  // Exposed ports (fronts/ports): the domain their names are under (create
  // answers it as `domain`, so the SDKs' getHost builds them), and whether
  // a sandbox asking for allowPublicTraffic (E2B's default) gets it
  // (http.allow_public_ports); without, its ports need its traffic token.
  std::string sandbox_domain;
  bool allow_public_ports = false;
};

// An exposed port's e2b-traffic-access-token: the API key of the sandbox's
// access token, when the token is that sandbox's (nullopt otherwise).
using TrafficTokenOpener =
    std::function<std::optional<std::string>(const std::string& sandbox_id, const std::string& token)>;

// `executor` is not owned and outlives the router's use.
TrafficTokenOpener AddE2bRoutes(http::Router& router, v1::Executor::StubInterface* executor, E2bOptions options);

}  // namespace warden::e2b
