// HttpServer: Warden's one HTTP/1.1 + WebSocket server (Boost.Beast), which
// every protocol front plugs into: the admin endpoints, MCP, and later E2B
// and the Jupyter Kernel Gateway.
//
// How a front plugs in (see fronts/mcp/mcp_http.cc for a whole one):
//   1. Describe the protocol once: a Protocol (router.h) with the function
//      that finds its credential (credentials.h: Bearer, X-API-KEY,
//      "token X" or ?token=) and the one that renders any error in its shape.
//   2. Add routes: router.Add(protocol, "POST", "/api/kernels/{id}/restart",
//      handler, {.max_body_bytes = ...}); router.Claim(protocol, "/api") so
//      unknown paths under it get the protocol's 404.
//   3. A handler, absl::Status(Request&, Exchange&), runs on the connection's
//      own thread and may block (call the warden.v1 stub synchronously). It
//      answers once through the Exchange: Send a Response, StartStream for
//      chunked / SSE / NDJSON, or AcceptWebSocket (subprotocols negotiated)
//      and Run it; or it returns an error for the protocol to render.
//   4. By then the caller's Host and Origin passed the access policy
//      (access_policy.h; preflights are answered by the server), the body
//      is read (bounded by the route's max_body_bytes, 413 past it), and,
//      unless the route is public, request.token was
//      authenticated to request.tenant. Fronts reach sessions only through
//      warden.v1, forwarding request.token (fronts/http/upstream.h).
//
// Clients are not trusted: request heads and bodies are bounded before they
// are read, every read and write has a deadline (an idle or slow client
// loses its connection, never a thread for long), connections are capped
// (one more gets 503), and no request can take the server down.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fronts/http/access_policy.h"
#include "fronts/http/router.h"

namespace warden::http {

struct HttpServerOptions {
  // "HOST:PORT": an IPv4 literal, a bracketed IPv6 literal or "localhost".
  // Port 0 picks a free port; HttpServer::port() reports it.
  std::string listen = "127.0.0.1:0";
  std::string name = "HTTP";  // in error messages: "cannot listen ... for the HTTP front"
  size_t max_header_bytes = 16 * 1024;  // request line and header fields
  size_t max_body_bytes = 1 << 20;      // for routes that do not set their own
  // Waiting for a request head, from connect or from the previous answer.
  absl::Duration head_timeout = absl::Seconds(30);
  // Reading a body, and each write of an answer (a client that stops reading).
  absl::Duration io_timeout = absl::Minutes(2);
  // Connections served at once, each on a thread of its own; one more is
  // answered 503 and closed at once.
  int max_connections = 256;
  // Which hosts and web origins may call (access_policy.h); applied to
  // every request before its route's handler, preflights answered.
  AccessOptions access;
};

// The tenant a token belongs to ("" when the request had none), or
// UNAUTHENTICATED. Called for every request to an authenticated route.
using Authenticate = std::function<absl::StatusOr<std::string>(absl::string_view token)>;

class HttpServer {
 public:
  // Binds, listens and starts accepting. Errors: InvalidArgument for a
  // malformed listen address or options; Unavailable with the reason when
  // the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           std::shared_ptr<const Router> router,
                                                           Authenticate authenticate);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();  // Stop()

  int port() const { return port_; }
  // Connections being served now (each holds a thread).
  int connections() const;
  // Waits until at most `n` connections are served, or `deadline`; says
  // which came first.
  bool WaitForConnectionsAtMost(int n, absl::Time deadline) const;
  // Stops accepting, breaks every open connection (handlers see their
  // writes fail) and joins their threads. Idempotent.
  void Stop();

 private:
  struct Shared;
  HttpServer(int port, std::shared_ptr<Shared> shared) : port_(port), shared_(std::move(shared)) {}
  void AcceptLoop();

  const int port_;
  std::shared_ptr<Shared> shared_;
  absl::Mutex stop_mu_;
  std::thread acceptor_ ABSL_GUARDED_BY(stop_mu_);
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace warden::http
