#include "fronts/admin/admin_front.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "fronts/http/exchange.h"

namespace warden::fronts {

void AddAdminRoutes(http::Router& router, AdminEndpoints endpoints) {
  auto protocol = std::make_shared<http::Protocol>();
  protocol->name = "admin";
  protocol->render_error = [](unsigned, const absl::Status& status, const http::Request&) {
    http::Response r = http::Response::Text(500, absl::StrCat(status.message(), "\n"));
    r.close = true;
    return r;
  };
  // Public, and quick: they run on an I/O thread, never waiting for a
  // handler thread, so probes are answered however busy the pool is.
  const http::RouteOptions public_route{.authenticate = false, .max_body_bytes = 0, .nonblocking = true};
  auto text = [](unsigned status, std::string body, std::string type = "text/plain; charset=utf-8") {
    http::Response r = http::Response::Text(status, std::move(body));
    r.content_type = std::move(type);
    r.headers.emplace_back("Cache-Control", "no-store");
    r.close = true;
    return r;
  };
  router.Add(
      protocol, "GET", "/metrics",
      [render = endpoints.render_metrics, text](http::Request&, http::Exchange& exchange) {
        return exchange.Send(text(200, render ? render() : "", "text/plain; version=0.0.4; charset=utf-8"));
      },
      public_route);
  router.Add(
      protocol, "GET", "/healthz",
      [text](http::Request&, http::Exchange& exchange) { return exchange.Send(text(200, "ok\n")); }, public_route);
  router.Add(
      protocol, "GET", "/readyz",
      [ready = endpoints.readiness, text](http::Request&, http::Exchange& exchange) {
        const absl::Status status = ready ? ready() : absl::OkStatus();
        return exchange.Send(status.ok() ? text(200, "ready\n")
                                         : text(503, absl::StrCat("not ready: ", status.message(), "\n")));
      },
      public_route);
}

}  // namespace warden::fronts
