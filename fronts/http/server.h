// HttpServer: Warden's one HTTP/1.1 + WebSocket server (Boost.Beast), which
// every protocol front plugs into: the admin endpoints, MCP, E2B and the
// Jupyter Kernel Gateway.
//
// How a front plugs in (see fronts/mcp/mcp_http.cc for a whole one):
//   1. Describe the protocol once: a Protocol (router.h) with the function
//      that finds its credential (credentials.h: Bearer, X-API-KEY,
//      "token X" or ?token=), the one that renders any error in its shape,
//      and the headers its browser clients send (CORS).
//   2. Add routes: router.Add(protocol, "POST", "/api/kernels/{id}/restart",
//      handler, {.max_body_bytes = ...}); router.Claim(protocol, "/api") so
//      unknown paths under it get the protocol's 404.
//   3. A handler, absl::Status(Request&, Exchange&), runs on a thread of the
//      server's handler pool and may block (call the warden.v1 stub
//      synchronously). It answers once through the Exchange: Send a
//      Response (written once the handler returns), StartStream for
//      chunked / SSE / NDJSON, or AcceptWebSocket (subprotocols negotiated)
//      and Start it, which frees the thread; or it returns an error for the
//      protocol to render. A route whose handler never blocks
//      (RouteOptions::nonblocking) runs on an I/O thread.
//   4. By then the caller's Host and Origin passed the access policy
//      (access_policy.h), the body is read (bounded by the route's
//      max_body_bytes, 413 past it), and, unless the route is public,
//      request.token was authenticated to request.tenant. Fronts reach
//      sessions only through warden.v1, forwarding request.token
//      (fronts/http/upstream.h).
//
// Asynchronous, the way Beast's advanced server is: a few I/O threads
// (about one per core) drive every connection, and no connection holds a
// thread while it waits for a client. Clients are not trusted: a request
// head must arrive within head_timeout, an idle keep-alive connection is
// closed after idle_timeout, every body read and write has io_timeout, heads
// and bodies are bounded before they are read, each tenant's long-lived
// streams are capped (TenantStreams), and connections are bounded in all:
// at the bound, the connections that have waited longest for a request
// head are closed to make room (a slowloris loses, a real client gets in),
// and only when every connection is busy is one more answered 503.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
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
  // A request head must arrive within this, from its first byte (or from
  // connect): a slow or silent client loses the connection.
  absl::Duration head_timeout = absl::Seconds(10);
  // A keep-alive connection without a new request for this long is closed.
  absl::Duration idle_timeout = absl::Seconds(60);
  // Reading a body, and each write of an answer (a client that stops reading).
  absl::Duration io_timeout = absl::Minutes(2);
  // Connections open at once, WebSockets included. At the bound the ones
  // waiting longest for a request head are closed first; if none is, one
  // more is answered 503. Lowered to fit RLIMIT_NOFILE (max_connections()).
  int max_connections = 16'384;
  // Long-lived streams (event streams, WebSockets) one tenant may hold open.
  int max_streams_per_tenant = 256;
  // I/O threads; 0: one per core (std::thread::hardware_concurrency).
  int io_threads = 0;
  // Threads for handlers that block, started on demand up to this many;
  // requests beyond wait for one (WorkPool: one tenant's take at most half,
  // the rest wait in its own line, lines served in turn).
  int handler_threads = 512;
  // Request bodies held in memory at once, every connection's together:
  // a request whose declared body (or, chunked, its route's limit) would
  // pass it is answered 503 before its body is read.
  size_t max_body_bytes_in_flight = size_t{1} << 30;
  // Which hosts and web origins may call (access_policy.h); applied to
  // every request before its route's handler, preflights answered.
  AccessOptions access;
  // Settings' names in refusals, e.g. "http." for "http.max_streams_per_tenant".
  std::string settings_prefix = "http.";
};

// The tenant a token belongs to ("" when the request had none), or
// UNAUTHENTICATED. Called for every request to an authenticated route, on
// an I/O thread: it must be quick and must not block.
using Authenticate = std::function<absl::StatusOr<std::string>(absl::string_view token)>;

class HttpServer {
 public:
  // Binds, listens and starts serving. Errors: InvalidArgument for a
  // malformed listen address or options; Unavailable with the reason when
  // the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           std::shared_ptr<const Router> router,
                                                           Authenticate authenticate);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();  // Stop()

  int port() const;
  // The connection bound in force: options.max_connections, lowered to
  // what RLIMIT_NOFILE leaves room for.
  int max_connections() const;
  // Connections open now, WebSockets included.
  int connections() const;
  // Waits until at most `n` connections are open (their memory returned),
  // or `deadline`; says which came first.
  bool WaitForConnectionsAtMost(int n, absl::Time deadline) const;
  // Stops accepting and closes every connection (handlers see their writes
  // fail, WebSockets their close), then waits until `deadline` for the
  // handlers still running; says whether they all returned. Before its
  // upstream goes (wardend drains the HTTP front before the gRPC server,
  // whose in-process channel its handlers call).
  bool Drain(absl::Time deadline);
  // Drain, then waits for every handler and joins the threads. Idempotent.
  void Stop();

 private:
  class Core;  // server.cc: the I/O threads, the acceptor, the connections
  explicit HttpServer(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  std::shared_ptr<Core> core_;
};

}  // namespace warden::http
