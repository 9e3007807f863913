#include "server/daemon.h"

#include <grp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>


#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/auth.h"
#include "common/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "kernel/zygote.h"
#include "server/read_file.h"
#include "spdlog/spdlog.h"

namespace warden {
namespace {

// Only the daemon's user may connect to a UNIX socket (0600), or also the
// members of `group` (0660, group-owned), e.g. the Debian package's "warden".
absl::Status SetSocketAccess(const std::string& path, const std::string& group) {
  gid_t gid = 0;
  if (!group.empty()) {
    const struct group* entry = getgrnam(group.c_str());
    if (entry == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("socket_group '", group, "' is not a group on this host: create it or leave it out"));
    }
    gid = entry->gr_gid;
    if (chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("chown ", path, " to group ", group));
    }
  }
  if (chmod(path.c_str(), group.empty() ? 0600 : 0660) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("chmod ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> CredentialsFor(const std::string& address,
                                                                       const DaemonOptions& options) {
  if (absl::StartsWith(address, "unix:")) return grpc::InsecureServerCredentials();
  if (!options.tls.cert_file.empty()) {
    // A node of a fleet trusts the gateway's CA alone for client
    // certificates: required when no token may be used instead.
    const std::string& client_ca =
        options.fleet.gateway_ca_file.empty() ? options.tls.client_ca_file : options.fleet.gateway_ca_file;
    grpc_ssl_client_certificate_request_type request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
    if (!options.tls.client_ca_file.empty()) request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    if (!options.fleet.gateway_ca_file.empty()) {
      request = options.auth.tokens_file.empty() ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                 : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    grpc::SslServerCredentialsOptions ssl(request);
    ASSIGN_OR_RETURN(std::string cert, ReadWholeFile(options.tls.cert_file));
    ASSIGN_OR_RETURN(std::string key, ReadWholeFile(options.tls.key_file));
    ssl.pem_key_cert_pairs.push_back({key, cert});
    if (!client_ca.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadWholeFile(client_ca));
    }
    return grpc::SslServerCredentials(ssl);
  }
  if (IsLoopbackListenAddress(address) && options.allow_insecure_loopback) {
    return grpc::InsecureServerCredentials();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "TCP listener ", address, " has no TLS: set tls.cert_file/key_file, or bind it to loopback and "
      "set allow_insecure_loopback (for testing)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Create(const DaemonOptions& options, Mode mode) {
  RETURN_IF_ERROR(options.Validate());
  auto daemon = std::unique_ptr<Daemon>(new Daemon(options));
  if (mode == Mode::kServe) {
    // Before any thread exists: the environment is changed here.
    daemon->systemd_ = SystemdNotifier::FromEnvironment(/*unset_environment=*/true);
    // Under warden-keeper on cgroup v2: the unit's cgroup, which the keeper
    // left for a leaf of its own (docs/keeper-design.md, "cgroups").
    if (const char* delegated = getenv("WARDEN_KEEPER_CGROUP"); delegated != nullptr && *delegated != '\0') {
      daemon->options_.executor.cgroup.delegated_cgroup = delegated;
    }
    RETURN_IF_ERROR(daemon->ClaimState());
  }
  ASSIGN_OR_RETURN(daemon->executor_, Executor::Create(daemon->options_.executor));
  if (daemon->executor_->own_namespace_owners()) {
    spdlog::info("{}", daemon->executor_->namespace_owners());
  } else {
    spdlog::warn("{}", daemon->executor_->namespace_owners());
  }
  if (mode == Mode::kServe) RETURN_IF_ERROR(daemon->ConnectKeeper());
  daemon->ReclaimPrevious();
  if (options.zygote.enabled) daemon->StartPythonZygote();
  RETURN_IF_ERROR(daemon->RecordState());
  // The egress proxy's threads start here, after the zygote (which must be
  // started before any thread exists).
  {
    const std::string state = daemon->state_ ? daemon->state_->dir() : "";
    std::string runtime = state.empty() ? "" : state + "/egress";
    if (runtime.empty()) {
      char tmpl[] = "/tmp/wardend-egress-XXXXXX";
      if (mkdtemp(tmpl) == nullptr) return absl::ErrnoToStatus(errno, "making a directory for the sandboxes' CA bundle");
      chmod(tmpl, 0755);
      runtime = tmpl;
    }
    ASSIGN_OR_RETURN(daemon->network_, Network::Create(daemon->options_, state, runtime));
  }
  // The image store (templates): without it wardend serves the host's
  // runtime only, and says so to whoever asks for a template.
  if (auto catalog = TemplateCatalog::Create(daemon->options_, *daemon->executor_); catalog.ok()) {
    daemon->templates_ = *std::move(catalog);
  } else {
    spdlog::warn("templates are off: {}", catalog.status().ToString());
  }
  if (auto catalog = VolumeCatalog::Create(daemon->options_); catalog.ok()) {
    daemon->volumes_ = *std::move(catalog);
  } else {
    spdlog::warn("volumes are off: {}", catalog.status().ToString());
  }
  daemon->engine_ = std::make_unique<Engine>(daemon->options_, *daemon->executor_, &daemon->metrics_,
                                             daemon->python_zygote_.get(), daemon->network_.get(),
                                             daemon->templates_.get(), daemon->volumes_.get());
  daemon->AdoptSessions();
  daemon->engine_->SetHealthListener([d = daemon.get()] { d->UpdateHealth(); });

  Authenticator authenticate = [](const std::string&) -> absl::StatusOr<std::string> {
    return std::string("default");
  };
  if (!options.auth.tokens_file.empty()) {
    ASSIGN_OR_RETURN(TokenTable tokens, LoadTokens(options.auth.tokens_file));
    auto table = std::make_shared<TokenTable>(std::move(tokens));
    authenticate = [table](const std::string& header) { return TenantFromAuthorization(*table, header); };
  }
  daemon->authenticate_ = authenticate;
  daemon->tenancy_ = std::make_shared<Tenancy>(std::move(authenticate), options.fleet.gateway_name);
  daemon->service_ = std::make_unique<ExecutorService>(*daemon->engine_, daemon->tenancy_);
  daemon->node_service_ = std::make_unique<NodeService>(
      *daemon->engine_, daemon->tenancy_, daemon->service_->tasks(),
      options.fleet.node_name.empty() ? options.fleet.node_id : options.fleet.node_name);
  if (daemon->templates_) {
    daemon->template_service_ = std::make_unique<TemplateService>(*daemon->templates_, daemon->tenancy_);
  }
  if (daemon->volumes_) {
    daemon->volume_service_ = std::make_unique<VolumeService>(*daemon->volumes_, *daemon->engine_, daemon->tenancy_);
  }
  return daemon;
}

Daemon::~Daemon() { Shutdown(absl::ZeroDuration()); }

absl::Status Daemon::ClaimState() {
  const std::string dir = options_.StateDirectory();
  if (dir.empty()) {
    spdlog::warn("no state_dir and no UNIX listener: nothing stops a second wardend, and what "
                 "this one leaves after a crash is not reclaimed; set state_dir (e.g. /run/warden)");
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(state_, StateDir::Claim(dir));
  return absl::OkStatus();
}

absl::Status Daemon::ConnectKeeper() {
  const std::string socket = SessionKeeper::SocketFromEnvironment();
  if (socket.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(keeper_, SessionKeeper::Connect(socket, state_ ? state_->dir() : ""));
  RETURN_IF_ERROR(keeper_->Receive(options_.drop_sessions));
  kept_groups_ = keeper_->KeptGroups();
  return absl::OkStatus();
}

void Daemon::AdoptSessions() {
  if (!keeper_) return;
  const AdoptReport report = keeper_->AdoptInto(*engine_, *executor_);
  spdlog::info("{}", report.Summary());
  engine_->FenceAdopted();
  engine_->SetSessionObserver(keeper_.get());
}

bool Daemon::Detach() {
  if (!keeper_) return false;
  draining_ = true;
  {
    absl::MutexLock lock(&health_mu_);
    health_ = nullptr;
  }
  if (server_) server_->GetHealthCheckService()->SetServingStatus(false);
  const auto sessions = engine_->AllSessions();
  keeper_->PersistAll(sessions);
  spdlog::info("detached from warden-keeper: {} sessions wait for the next wardend", sessions.size());
  return true;
}

void Daemon::ReclaimPrevious() {
  if (!state_ || !state_->previous()) return;
  const ReclaimReport report = Reclaim(*state_->previous(), executor_->cgroups(), kept_groups_);
  if (report.problems.empty()) {
    spdlog::info("{}", report.Summary());
  } else {
    spdlog::warn("{}", report.Summary());
  }
}

absl::Status Daemon::RecordState() {
  if (!state_) return absl::OkStatus();
  StateRecord record;
  record.daemon_pid = getpid();
  if (const CgroupManager* cgroups = executor_->cgroups(); cgroups != nullptr) {
    const std::vector<std::string> subtrees = cgroups->SubtreePaths();
    if (!subtrees.empty()) record.cgroup_subtree = subtrees.front().substr(subtrees.front().rfind('/') + 1);
  }
  for (const auto& [subtree, groups] : kept_groups_) record.held_subtrees.push_back(subtree);
  if (python_zygote_) {
    // Gone already: nothing of it for a successor to reclaim.
    if (absl::StatusOr<uint64_t> start = ProcessStartTime(python_zygote_->pid()); start.ok()) {
      record.processes.push_back({python_zygote_->pid(), *start, "python zygote"});
    }
  }
  for (const std::string& address : options_.listen) {
    if (absl::StartsWith(address, "unix:")) record.sockets.push_back(address.substr(5));
  }
  return state_->Write(record);
}

void Daemon::StartPythonZygote() {
  const std::string program =
      options_.zygote.program.empty() ? DefaultPythonZygoteProgram() : options_.zygote.program;
  const std::string kernels_dir =
      options_.kernels_dir.empty() ? SessionOptions::DefaultKernelsDir() : options_.kernels_dir;
  auto zygote =
      warden::StartPythonZygote(program, kernels_dir, WarmModules(options_, Language::kPython));
  if (!zygote.ok()) {
    // Python still works, each sandbox starting its own interpreter.
    spdlog::warn("Python zygote unavailable, Python sessions start cold: {}",
                 std::string(zygote.status().message()));
    return;
  }
  spdlog::info("Python zygote (pid {}): {}", (*zygote)->pid(), (*zygote)->description());
  python_zygote_ = *std::move(zygote);
}

std::vector<WorkerProbe> Daemon::Probe() {
  return ProbeWorkers(*executor_, engine_->ConfiguredProfiles());
}

void Daemon::UpdateHealth() {
  absl::MutexLock lock(&health_mu_);
  if (health_ == nullptr) return;
  const absl::Status health = engine_->Health();
  health_->SetServingStatus(health.ok() && !draining_);
}

absl::Status Daemon::Start() {
  engine_->Start();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const int max_message = static_cast<int>(std::min<int64_t>(options_.limits.max_message_bytes(), INT32_MAX));
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  std::vector<std::unique_ptr<int>> ports;
  for (const std::string& address : options_.listen) {
    ASSIGN_OR_RETURN(auto credentials, CredentialsFor(address, options_));
    if (absl::StartsWith(address, "unix:")) {
      const std::string path = address.substr(5);
      const std::string dir = path.substr(0, path.rfind('/'));
      if (!dir.empty()) mkdir(dir.c_str(), 0755);  // e.g. /run/warden; fine if it exists
    }
    ports.push_back(std::make_unique<int>(0));
    builder.AddListeningPort(address, credentials, ports.back().get());
  }
  builder.RegisterService(service_.get());
  builder.RegisterService(node_service_.get());
  if (template_service_) builder.RegisterService(template_service_.get());
  if (volume_service_) builder.RegisterService(volume_service_.get());
  for (auto& service : extra_services_) builder.RegisterService(service.get());
  // No other user may connect to the UNIX sockets, not even in the moment
  // between bind and the chmod below. (The umask is process-wide; sandboxes
  // set their own, so the ones being built meanwhile are unaffected.)
  const mode_t old_umask = umask(0077);
  server_ = builder.BuildAndStart();
  umask(old_umask);
  if (!server_) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", absl::StrJoin(options_.listen, ", "),
        ": is another wardend running, or is the address or socket directory unusable?"));
  }
  for (size_t i = 0; i < options_.listen.size(); ++i) {
    const std::string& address = options_.listen[i];
    if (absl::StartsWith(address, "unix:")) RETURN_IF_ERROR(SetSocketAccess(address.substr(5), options_.socket_group));
    if (absl::StartsWith(address, "unix:") || !absl::EndsWith(address, ":0")) {
      listening_.push_back(address);
    } else {
      listening_.push_back(absl::StrCat(address.substr(0, address.size() - 1), *ports[i]));
    }
  }
  {
    absl::MutexLock lock(&health_mu_);
    health_ = server_->GetHealthCheckService();
  }
  UpdateHealth();
  fronts::AdminEndpoints admin;
  admin.render_metrics = [this] { return metrics_.Render(); };
  admin.readiness = [this]() -> absl::Status {
    if (draining_) return absl::UnavailableError("shutting down");
    RETURN_IF_ERROR(engine_->Health());  // a pool cannot start any worker
    if (!engine_->Ready()) return absl::UnavailableError("warm pools are still filling");
    return absl::OkStatus();
  };
  fronts::HttpFrontsOptions fronts_options{.http_listen = options_.http_listen,
                                            .admin_listen = options_.admin_listen,
                                            .max_code_bytes = options_.limits.max_code_bytes,
                                            .max_file_bytes = options_.limits.max_file_bytes,
                                            .tokens_configured = !options_.auth.tokens_file.empty(),
                                            .http = options_.http};
  ASSIGN_OR_RETURN(http_, fronts::HttpFronts::Start(fronts_options, *server_, authenticate_, std::move(admin)));
  if (http_->http_port() != 0) {
    spdlog::info("HTTP front (MCP at /mcp) on port {}", http_->http_port());
    if (std::string warning = http_->ConnectionBoundWarning(); !warning.empty()) spdlog::warn("{}", warning);
  }
  if (keeper_) {
    keeper_->Serving();
  } else {
    systemd_.Notify(absl::StrCat("READY=1\nSTATUS=serving on ", absl::StrJoin(listening_, ", ")));
  }
  return absl::OkStatus();
}

void Daemon::Drain(absl::Duration grace) {
  const absl::Time start = absl::Now();
  draining_ = true;  // /readyz and gRPC health say so from now on
  engine_->StartDraining();
  UpdateHealth();
  // Running executions end first: the gateway sends nothing new meanwhile.
  const absl::Time executions_end =
      start + std::min(absl::Milliseconds(options_.fleet.drain_wait_ms), grace / 2);
  while (engine_->Stats().executing > 0 && absl::Now() < executions_end) absl::SleepFor(absl::Milliseconds(20));
  const int still_running = engine_->Stats().executing;
  // The rest of the grace period, less a second for the shutdown itself.
  const Engine::HandoverReport report =
      engine_->HandOverAll(std::max(start + grace - absl::Seconds(1), absl::Now() + absl::Seconds(1)),
                           std::max(2, static_cast<int>(std::thread::hardware_concurrency())));
  spdlog::info("drained in {} ms: {} sessions handed over, {} lost{}", absl::ToInt64Milliseconds(absl::Now() - start),
               report.handed_over, report.lost,
               still_running ? absl::StrCat(" (", still_running, " executions outlived fleet.drain_wait_ms)") : "");
}

void Daemon::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  systemd_.Notify("STOPPING=1\nSTATUS=shutting down");
  draining_ = true;  // /readyz says so from now on
  {
    absl::MutexLock lock(&health_mu_);
    health_ = nullptr;  // pools that change their health from now on change nothing
  }
  if (server_) server_->GetHealthCheckService()->SetServingStatus(false);
  // Requests waiting in line for a turn are refused now (UNAVAILABLE:
  // retry elsewhere, or after the restart): no thread waits for them, and
  // the servers below wait for every call in flight to end (those given
  // their turn, waiting for a warm worker included).
  if (engine_) engine_->StopAdmitting();
  // The HTTP front first: its handlers call the gRPC server in process, and
  // must be done with it (or blocked in a call the deadline will cancel)
  // before it goes.
  const absl::Time deadline = absl::Now() + grace;
  if (http_ && !http_->Drain(deadline)) spdlog::warn("HTTP requests were still running at shutdown");
  if (server_) {
    // Stops accepting; in-flight calls get until the deadline, then are
    // cancelled (which interrupts their cells).
    server_->Shutdown(absl::ToChronoTime(deadline));
  }
  if (service_) service_->StopWatchers();  // their threads use the engine
  if (engine_) engine_->Stop();
  if (service_ && !service_->tasks().WaitIdle(absl::Now() + grace + absl::Seconds(5))) {
    spdlog::warn("{} calls were still running at shutdown", service_->tasks().running());
  }
  if (server_) server_->Wait();
  http_.reset();  // after the calls it forwarded have ended; /metrics reads the engine
  engine_.reset();
  python_zygote_.reset();  // sandboxes cloned from it live on until killed above
  if (keeper_) {
    // Stop for real: the predecessors' subtrees that held adopted sessions
    // go too (those sessions were ended with the engine), and the keeper
    // quits once this process exits.
    if (const CgroupManager* cgroups = executor_->cgroups(); cgroups != nullptr) {
      for (const auto& [subtree, groups] : kept_groups_) {
        if (auto r = cgroups->ReclaimSubtree(subtree); !r.ok()) {
          spdlog::warn("cgroup subtree {}: {}", subtree, std::string(r.status().message()));
        }
      }
    }
    keeper_->Stop();
  }
  executor_.reset();  // removes Warden's cgroups
  if (state_) {
    // Everything the record names is gone: nothing for a successor to reclaim.
    for (const std::string& address : options_.listen) {
      if (absl::StartsWith(address, "unix:")) unlink(address.substr(5).c_str());
    }
    state_->RemoveRecord();
    state_.reset();  // releases the lock last
  }
}

}  // namespace warden
