// The admin endpoints on the HTTP front, for Prometheus and probes:
//   GET /metrics  200, text format 0.0.4 from the metrics callback
//   GET /healthz  200 "ok" while the process is up
//   GET /readyz   200 "ready", or 503 and the reason from the readiness check
// HEAD works wherever GET does; other methods get 405. Public (no token),
// as kubelet and Prometheus send none; every answer closes its connection.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "fronts/http/router.h"

namespace warden::fronts {

struct AdminEndpoints {
  // The metrics page; empty function: an empty page.
  std::function<std::string()> render_metrics;
  // OK: ready; otherwise /readyz answers 503 with the message. Must be
  // thread-safe and quick. Empty function: always ready.
  std::function<absl::Status()> readiness;
};

void AddAdminRoutes(http::Router& router, AdminEndpoints endpoints);

}  // namespace warden::fronts
