// Router: (method, path pattern) -> handler, and which protocol owns which
// paths, so that a request no route takes still gets its protocol's 404.
//
// Patterns are absolute paths whose segments are literals, "{name}" (one
// segment) or, last, "{name...}" (the rest of the path, slashes and all):
//   "/api/kernels/{kernel_id}/channels", "/files/{path...}".
// Literal segments win over parameters, so "/sandboxes/list" beats
// "/sandboxes/{id}". HEAD is served by a GET route.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fronts/http/request.h"

namespace warden::http {

class Exchange;

// What a handler returns: OK once it has answered through the Exchange;
// an error (before answering) that the route's protocol renders, with the
// HTTP status HttpStatusFor(code) (fronts/http/status.h).
using Handler = std::function<absl::Status(Request&, Exchange&)>;

// How one front speaks to its clients: where its credential is and what its
// errors look like. Every error the HTTP server makes for a route (401, 404,
// 405, 413, a handler's failure) goes through render_error.
struct Protocol {
  std::string name;  // "mcp", "e2b", "jupyter", "admin"
  // The bearer credential in a request, "" if there is none. See
  // fronts/http/credentials.h for the usual places.
  std::function<std::string(const Request&)> find_token;
  // The protocol's error body for `status`, sent with `http_status`.
  std::function<Response(unsigned http_status, const absl::Status& status, const Request& request)>
      render_error;
  // Whether render_error's Response keeps its own HTTP status (Connect
  // streams answer errors with 200) instead of taking `http_status`.
  bool render_error_sets_status = false;
  // CORS (access_policy.h), for the origins the server allows: the request
  // headers the protocol's browser clients send beyond the safelisted ones
  // (a preflight's Access-Control-Allow-Headers), and the answer headers
  // they read (Access-Control-Expose-Headers).
  std::vector<std::string> cors_request_headers;
  std::vector<std::string> cors_expose_headers;
};

struct RouteOptions {
  // Public routes (health checks) skip authentication.
  bool authenticate = true;
  // Largest request body taken; 0: HttpServerOptions::max_body_bytes.
  size_t max_body_bytes = 0;
  // The handler never blocks (no warden.v1 call, no lock held for long):
  // it runs on an I/O thread instead of the handler pool, and may only
  // Send (the admin endpoints).
  bool nonblocking = false;
  // For a route that does not authenticate: the tenant its request counts
  // as on the handler pool (each tenant's share of the threads, WorkPool),
  // found on an I/O thread, so quickly and without blocking (the E2B
  // sandbox plane opens the request's access token). The handler may set
  // request.tenant itself later, once it has checked more.
  std::function<std::string(const Request&)> tenant_of;

  // The body is not read: the handler answers, or takes the connection as
  // it is (Exchange::TakeConnection) to relay it elsewhere (exposed ports).
  bool raw = false;
};

struct Route {
  std::shared_ptr<const Protocol> protocol;
  std::string method;
  std::vector<std::string> segments;  // the pattern split at '/'
  Handler handler;
  RouteOptions options;
};

class Router {
 public:
  void Add(std::shared_ptr<const Protocol> protocol, std::string method, absl::string_view pattern,
           Handler handler, RouteOptions options = {});
  // Paths under `prefix` ("/api", or "/" for everything left) belong to
  // `protocol` when no route takes them; the longest prefix wins.
  void Claim(std::shared_ptr<const Protocol> protocol, std::string prefix);
  // Requests whose Host `match` takes (filling the route's params) go to
  // `handler` whatever their method and path, before any path route: a
  // server named by its Host (an exposed port). One such route at most.
  using HostMatch = std::function<bool(absl::string_view host, absl::flat_hash_map<std::string, std::string>* params)>;
  void AddHost(std::shared_ptr<const Protocol> protocol, HostMatch match, Handler handler, RouteOptions options = {});
  // The host route for `host`, with its params; null if none takes it.
  const Route* FindByHost(absl::string_view host, absl::flat_hash_map<std::string, std::string>* params) const;

  struct Match {
    const Route* route = nullptr;       // null: no route for this method and path
    absl::flat_hash_map<std::string, std::string> params;  // decoded
    const Protocol* protocol = nullptr;  // the route's or the claiming one; may be null
    std::vector<std::string> allowed;    // methods the path has, when route is null
  };
  Match Find(absl::string_view method, absl::string_view path) const;
  // The methods routes take at `path` (HEAD wherever GET), for preflights.
  std::vector<std::string> MethodsAt(absl::string_view path) const;

  // Every route, in the order added: for tests that walk the table.
  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
  std::vector<std::pair<std::string, std::shared_ptr<const Protocol>>> claims_;
  std::optional<Route> host_route_;
  HostMatch host_match_;
};

}  // namespace warden::http
