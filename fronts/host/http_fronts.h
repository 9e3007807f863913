// HttpFronts: the HTTP front as wardend and warden-gateway host it, built
// the same way by both. One HttpServer on
// http_listen carries every protocol front (MCP at /mcp; the admin
// endpoints, the E2B API, the Jupyter Kernel Gateway API under /api) and,
// if admin_listen is set, a second one carries the admin endpoints alone.
// Which hosts and origins may call is the HTTP server's one policy
// (fronts/http/access_policy.h). The fronts reach the engine only through
// warden.v1 over the gRPC server's in-process channel, with the client's
// token, so they see the same tenants, quotas and limits as gRPC callers.
//
// A new front (fronts/e2b, fronts/jupyter) adds its routes in Start().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fronts/admin/admin_front.h"
#include "fronts/host/http_settings.h"
#include "fronts/http/server.h"
#include "fronts/jupyter/kernel_gateway.h"
#include "fronts/mcp/mcp_server.h"
#include "grpcpp/server.h"
#include "warden/v1/executor.grpc.pb.h"
#include "warden/v1/images.grpc.pb.h"

namespace warden::fronts {

struct HttpFrontsOptions {
  std::string http_listen;   // "HOST:PORT" of the protocol fronts; empty: none
  std::string admin_listen;  // "HOST:PORT" of the admin endpoints alone; empty: none
  // What the server accepts, for the fronts' own bounds on bodies.
  int64_t max_code_bytes = 1 << 20;
  int64_t max_file_bytes = 64LL << 20;
  // Without tokens, a request's Host must name loopback or an entry of
  // http.allowed_hosts (DNS rebinding); listed hosts are checked with
  // tokens too.
  bool tokens_configured = false;
  // The `http` section: who may call from a browser, and the connections,
  // streams and threads the front holds.
  HttpSettings http;
};

// Maps an "authorization" header value ("Bearer <token>", or empty) to a
// tenant, as the gRPC server behind the fronts does.
using TokenAuthenticator = std::function<absl::StatusOr<std::string>(const std::string& authorization)>;

class HttpFronts {
 public:
  // `server` is the started gRPC server (not owned; it outlives the fronts).
  static absl::StatusOr<std::unique_ptr<HttpFronts>> Start(const HttpFrontsOptions& options, grpc::Server& server,
                                                          TokenAuthenticator authenticate, AdminEndpoints admin);
  ~HttpFronts();  // Stop()

  int http_port() const { return http_ ? http_->port() : 0; }
  int admin_port() const { return admin_ ? admin_->port() : 0; }
  // The HTTP front's connections now; 0 without it.
  int http_connections() const { return http_ ? http_->connections() : 0; }
  // What the operator should hear when RLIMIT_NOFILE lowered the bound
  // below http.max_connections; empty otherwise.
  std::string ConnectionBoundWarning() const;
  // The routes served on http_listen (null without it): for tests that
  // walk every route.
  const http::Router* router() const { return router_.get(); }
  // Closes the HTTP front's listener and connections, and waits until
  // `deadline` for its handlers, which call the gRPC server: before that
  // server shuts down (a call on its in-process channel after that would
  // find it gone). The admin endpoints go on answering until Stop.
  bool Drain(absl::Time deadline);
  // Closes the listeners and every connection, and joins their threads.
  void Stop();

 private:
  HttpFronts() = default;

  TokenAuthenticator authenticate_;
  std::unique_ptr<v1::Executor::Stub> executor_;  // over the in-process channel
  std::unique_ptr<v1::Volumes::Stub> volumes_;    // the same channel
  std::unique_ptr<mcp::McpTools> mcp_tools_;
  std::unique_ptr<mcp::McpServer> mcp_;
  std::shared_ptr<jupyter::KernelGateway> kernel_gateway_;
  std::shared_ptr<const http::Router> router_;
  int64_t max_connections_ = 0;  // http.max_connections as configured
  std::unique_ptr<http::HttpServer> http_;
  std::unique_ptr<http::HttpServer> admin_;
};

}  // namespace warden::fronts
