// AdminHttpServer: the admin port (--admin-listen HOST:PORT). A deliberately
// small HTTP/1.1 server on its own thread serving
//   GET /metrics  200, text format 0.0.4 from Metrics::Render()
//   GET /healthz  200 "ok" while the process is up
//   GET /readyz   200 "ready", or 503 and the reason from the readiness check
// and 404 / 405 / 400 for anything else. HEAD works wherever GET does.
//
// Clients are not trusted to behave: one poll() loop serves every connection,
// so a silent or slow client costs a slot, never the thread; requests are
// bounded in size, connections in number and in time, and every response
// closes its connection.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sandbox/unique_fd.h"
#include "server/metrics.h"

namespace warden {

struct AdminHttpOptions {
  // "HOST:PORT" where HOST is an IPv4 literal, a bracketed IPv6 literal
  // ("[::1]:9464", "[::]:9464") or "localhost" (127.0.0.1). Port 0 picks a
  // free port; AdminHttpServer::port() reports it.
  std::string listen = "127.0.0.1:9464";
  // From accept to the last byte of the response. Generous for a scrape on
  // loopback, short enough that a slowloris client gives its slot back soon.
  absl::Duration request_timeout = absl::Seconds(5);
  // Request line plus headers. Prometheus and kubelet send a few hundred bytes.
  size_t max_request_bytes = 8 * 1024;
  // Connections served at once; one more is answered 503 and closed at once,
  // so a flood never leaves probes stuck in the kernel's accept queue.
  int max_connections = 32;
};

class AdminHttpServer {
 public:
  // OK: ready. Anything else: /readyz answers 503 with the status message.
  // Runs on the server thread for every /readyz request; must be thread-safe
  // and quick (it holds up the other admin clients while it runs).
  using ReadinessCheck = std::function<absl::Status()>;

  // Binds, listens and starts the server thread. `metrics` is not owned and
  // must outlive the server (null: /metrics is empty); `readiness` may be
  // empty (always ready). Errors: InvalidArgument for a malformed
  // `options.listen`; the errno status of bind/listen otherwise, e.g.
  // "cannot listen on 0.0.0.0:9464: Address already in use".
  static absl::StatusOr<std::unique_ptr<AdminHttpServer>> Start(AdminHttpOptions options,
                                                                const Metrics* metrics,
                                                                ReadinessCheck readiness);

  AdminHttpServer(const AdminHttpServer&) = delete;
  AdminHttpServer& operator=(const AdminHttpServer&) = delete;
  ~AdminHttpServer();  // Stop()

  // The bound port (the real one when options.listen asked for port 0).
  int port() const { return port_; }

  // Wakes the server thread, which closes the listener and every open
  // connection without waiting for slow clients, and joins it. Idempotent;
  // must not be called from the readiness check (it runs on that thread).
  void Stop();

 private:
  class Loop;  // the server thread's state; lives in admin_http.cc

  AdminHttpServer(int port, UniqueFd wake, std::unique_ptr<Loop> loop);

  const int port_;
  UniqueFd wake_;  // eventfd; written once by Stop()
  std::unique_ptr<Loop> loop_;
  absl::Mutex stop_mu_;
  std::thread thread_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace warden
