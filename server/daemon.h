// Daemon: wardend as one object. Create() builds everything from the
// options (the executor first, before any thread exists); Start() begins
// serving; Shutdown() stops in a fixed order: health NOT_SERVING, stop
// accepting, let in-flight calls finish within the grace period (then cancel
// them, which interrupts their cells), stop the engine (sessions closed,
// pools drained), and finally the executor (cgroups removed).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "server/executor_service.h"
#include "server/http_fronts.h"
#include "server/options.h"

namespace warden {

class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(const DaemonOptions& options);
  ~Daemon();

  // Serves another gRPC service (the agent) beside the Executor; call it
  // between Create and Start. Its work runs on tasks() so Shutdown drains it.
  void AddService(std::unique_ptr<grpc::Service> service) { extra_services_.push_back(std::move(service)); }
  const Authenticator& authenticator() const { return authenticate_; }
  Tasks& tasks() { return service_->tasks(); }

  absl::Status Start();
  void Shutdown(absl::Duration grace);

  // The addresses actually bound ("127.0.0.1:0" resolved to its port).
  const std::vector<std::string>& listening() const { return listening_; }
  // The HTTP front's port and the admin-only port actually bound (0: off).
  int http_port() const { return http_ ? http_->http_port() : 0; }
  int admin_port() const { return http_ ? http_->admin_port() : 0; }
  Engine& engine() { return *engine_; }

 private:
  explicit Daemon(const DaemonOptions& options) : options_(options) {}
  void StartPythonZygote();

  DaemonOptions options_;
  Metrics metrics_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<ForkServer> python_zygote_;  // null: Python starts cold
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ExecutorService> service_;
  Authenticator authenticate_;
  std::vector<std::unique_ptr<grpc::Service>> extra_services_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpFronts> http_;
  std::atomic<bool> draining_{false};
  std::vector<std::string> listening_;
  bool shut_down_ = false;
};

}  // namespace warden
