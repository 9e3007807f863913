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

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/systemd_notify.h"
#include "fronts/host/http_fronts.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server.h"
#include "server/engine.h"
#include "server/executor_service.h"
#include "server/node_service.h"
#include "server/options.h"
#include "server/session_keeper.h"
#include "server/template_service.h"
#include "server/volume_service.h"
#include "server/startup_probe.h"
#include "server/state_dir.h"

namespace warden {

class Daemon {
 public:
  // kServe owns the state directory (its lock, the crash record, reclaiming
  // what a killed predecessor left); kProbe is `wardend --check`'s daemon,
  // which never listens and leaves the state directory to a live wardend.
  enum class Mode { kServe, kProbe };
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(const DaemonOptions& options,
                                                        Mode mode = Mode::kServe);
  ~Daemon();

  // Serves another gRPC service (the agent) beside the Executor; call it
  // between Create and Start. Its work runs on tasks() so Shutdown drains it.
  void AddService(std::unique_ptr<grpc::Service> service) { extra_services_.push_back(std::move(service)); }
  const Authenticator& authenticator() const { return authenticate_; }
  // Who calls (a token's tenant, or the one warden-gateway forwards).
  std::shared_ptr<const Tenancy> tenancy() const { return tenancy_; }
  Tasks& tasks() { return service_->tasks(); }

  // Serves; once the listeners are bound, says so to warden-keeper
  // (SERVING), or without a keeper to systemd ($NOTIFY_SOCKET: READY=1).
  absl::Status Start();
  void Shutdown(absl::Duration grace);
  // Under warden-keeper: stops serving and leaves every session to the
  // keeper and the next wardend (their metadata written afresh); the caller
  // then exits at once, without tearing anything down. False (and nothing
  // done) without a keeper.
  bool Detach();
  bool has_keeper() const { return keeper_ != nullptr; }
  // A node of a fleet, on SIGTERM (docs/fleet.md): stops taking new work,
  // lets running executions finish (fleet.drain_wait_ms at most), then
  // hands every session over through the shared storage, all within
  // `grace`. Shutdown follows.
  void Drain(absl::Duration grace);

  // The addresses actually bound ("127.0.0.1:0" resolved to its port).
  const std::vector<std::string>& listening() const { return listening_; }
  // The HTTP front's port and the admin-only port actually bound (0: off).
  int http_port() const { return http_ ? http_->http_port() : 0; }
  int admin_port() const { return http_ ? http_->admin_port() : 0; }
  // The HTTP front's connections now (0 without http_listen).
  int http_connections() const { return http_ ? http_->http_connections() : 0; }
  // The HTTP front's routes (null without http_listen), for tests.
  const http::Router* http_router() const { return http_ ? http_->router() : nullptr; }
  Engine& engine() { return *engine_; }

  // Starts one worker of each configured language, as its pool would, and
  // reports (server/startup_probe.h): before Start(), and for --check.
  std::vector<WorkerProbe> Probe();

 private:
  explicit Daemon(const DaemonOptions& options) : options_(options) {}
  // Locks the state directory and reclaims what a crashed predecessor left;
  // before the executor exists, so nothing of ours is mistaken for it.
  absl::Status ClaimState();
  void ReclaimPrevious();
  // Under warden-keeper: connects and takes back the sandboxes it holds
  // (adopted into the engine once it exists, by AdoptSessions).
  absl::Status ConnectKeeper();
  void AdoptSessions();
  absl::Status RecordState();
  void StartPythonZygote();
  // gRPC health: SERVING unless draining or a pool cannot start any worker.
  void UpdateHealth();

  DaemonOptions options_;
  SystemdNotifier systemd_;  // inactive unless a Type=notify unit runs wardend itself
  std::unique_ptr<StateDir> state_;  // null: no state directory
  std::unique_ptr<SessionKeeper> keeper_;  // null: sessions die with this process
  std::map<std::string, std::set<std::string>> kept_groups_;  // adopted, by predecessor subtree
  Metrics metrics_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<ForkServer> python_zygote_;  // null: Python starts cold
  std::unique_ptr<Network> network_;  // the egress proxy; outlives the engine's sandboxes
  std::unique_ptr<TemplateCatalog> templates_;  // null: templates are off
  std::unique_ptr<VolumeCatalog> volumes_;      // null: volumes are off
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ExecutorService> service_;
  std::unique_ptr<NodeService> node_service_;
  std::unique_ptr<TemplateService> template_service_;  // with templates_
  std::unique_ptr<VolumeService> volume_service_;      // with volumes_
  Authenticator authenticate_;
  std::shared_ptr<const Tenancy> tenancy_;
  std::vector<std::unique_ptr<grpc::Service>> extra_services_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<fronts::HttpFronts> http_;
  std::atomic<bool> draining_{false};
  absl::Mutex health_mu_;
  // The server's health service while it serves; null before and after.
  grpc::HealthCheckServiceInterface* health_ ABSL_GUARDED_BY(health_mu_) = nullptr;
  std::vector<std::string> listening_;
  bool shut_down_ = false;
};

}  // namespace warden
