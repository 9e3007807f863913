#include "gateway/gateway.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "gateway/proxy_call.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace warden::gateway {
namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
  std::string out;
  char buf[8192];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  fclose(f);
  return out;
}

class Service final : public grpc::CallbackGenericService {
 public:
  explicit Service(Gateway& gateway) : gateway_(gateway) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return NewProxyCall(gateway_, ctx);
  }

 private:
  Gateway& gateway_;
};

}  // namespace

std::string MovedSessions::Get(const std::string& session_id) const {
  absl::MutexLock lock(&mu_);
  auto it = where_.find(session_id);
  return it == where_.end() ? std::string() : it->second;
}

void MovedSessions::Put(const std::string& session_id, const std::string& node_id) {
  absl::MutexLock lock(&mu_);
  // A bounded cache: when full, it starts again (the ledger still knows).
  if (where_.size() >= capacity_) where_.clear();
  where_[session_id] = node_id;
}

void MovedSessions::Forget(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  where_.erase(session_id);
}

absl::StatusOr<std::unique_ptr<Gateway>> Gateway::Create(const GatewayOptions& options,
                                                         std::unique_ptr<NodeSource> source) {
  RETURN_IF_ERROR(options.Validate());
  auto gateway = std::unique_ptr<Gateway>(new Gateway(options));
  ASSIGN_OR_RETURN(gateway->routes_, BuildRoutes());
  ASSIGN_OR_RETURN(gateway->tokens_, LoadTokens(options.tokens_file));
  if (!source) {
    source = options.nodes.dns.empty() ? StaticNodes(options.nodes.addresses)
                                       : DnsNodes(options.nodes.dns, options.nodes.port);
  }
  spdlog::info("nodes: {}", source->Describe());
  gateway->nodes_ = std::make_unique<NodeDirectory>(options, std::move(source));
  gateway->calls_ = gateway->metrics_
                        .Counter("warden_gateway_calls_total", "Calls through the gateway, by route and outcome")
                        .value_or(nullptr);
  gateway->retries_ = gateway->metrics_
                          .Counter("warden_gateway_reroutes_total",
                                   "Calls sent on elsewhere: refused (placed again), moved, takeover")
                          .value_or(nullptr);
  Gateway* g = gateway.get();
  (void)gateway->metrics_.GaugeCallback("warden_gateway_nodes", "Nodes by state", [g] {
    double up = 0, draining = 0, down = 0;
    for (const auto& node : g->nodes().All()) {
      if (!node->up()) {
        ++down;
      } else if (node->draining()) {
        ++draining;
      } else {
        ++up;
      }
    }
    return std::vector<std::pair<MetricLabels, double>>{
        {{{"state", "up"}}, up}, {{{"state", "draining"}}, draining}, {{{"state", "down"}}, down}};
  });
  return gateway;
}

Gateway::~Gateway() { Shutdown(absl::ZeroDuration()); }

const Route* Gateway::RouteOf(const std::string& method) const {
  auto it = routes_.find(method);
  return it == routes_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::string> Gateway::TenantOf(const grpc::ServerContextBase& ctx) const {
  const auto& metadata = ctx.client_metadata();
  // A client must not pass a tenant off as forwarded: only the gateway
  // forwards (and nodes accept it only from the gateway's certificate).
  if (metadata.find("x-warden-tenant") != metadata.end()) {
    return absl::UnauthenticatedError("x-warden-tenant is the gateway's to set; authenticate with a bearer token");
  }
  auto it = metadata.find("authorization");
  const std::string header = it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
  return TenantFromAuthorization(tokens_, header);
}

v1::NodeStatus Gateway::FleetStatus() const {
  v1::NodeStatus out;
  out.set_node_id("gateway");
  out.set_node_name("warden-gateway");
  out.set_version(WARDEN_VERSION);
  for (const auto& node : nodes_->All()) {
    v1::NodeStatus status = node->status();
    status.set_address(node->address());
    if (const absl::Time heard = node->last_heard(); heard != absl::InfinitePast()) {
      status.set_last_heard_unix_ms(absl::ToUnixMillis(heard));
    }
    if (auto down = node->down()) {
      status.set_unreachable_since_unix_ms(absl::ToUnixMillis(down->first));
      status.set_unreachable_reason(down->second);
      *out.add_unreachable() = std::move(status);
      continue;
    }
    v1::NodeCapacity* c = out.mutable_capacity();
    c->set_max_sessions(c->max_sessions() + status.capacity().max_sessions());
    c->set_max_live(c->max_live() + status.capacity().max_live());
    c->set_cpus(c->cpus() + status.capacity().cpus());
    c->set_memory_bytes(c->memory_bytes() + status.capacity().memory_bytes());
    v1::NodeLoad* l = out.mutable_load();
    l->set_sessions(l->sessions() + status.load().sessions());
    l->set_live_sandboxes(l->live_sandboxes() + status.load().live_sandboxes());
    l->set_executing(l->executing() + status.load().executing());
    l->set_queued(l->queued() + status.load().queued());
    l->set_warm_workers(l->warm_workers() + status.load().warm_workers());
    l->set_memory_available_bytes(l->memory_available_bytes() + status.load().memory_available_bytes());
    *out.add_nodes() = std::move(status);
  }
  return out;
}

void Gateway::Count(const Route& route, const char* outcome) {
  if (calls_) calls_->Add({{"route", RouteKindName(route.kind)}, {"outcome", outcome}});
}

void Gateway::CountRetry(const char* why) {
  if (retries_) retries_->Add({{"why", why}});
}

absl::Status Gateway::Start() {
  nodes_->Start();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  const int max_message = static_cast<int>(
      std::min<int64_t>(options_.max_code_bytes + options_.max_file_bytes + (1 << 20), INT32_MAX));
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options_.tls.cert_file.empty()) {
    grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    ASSIGN_OR_RETURN(std::string cert, ReadWholeFile(options_.tls.cert_file));
    ASSIGN_OR_RETURN(std::string key, ReadWholeFile(options_.tls.key_file));
    ssl.pem_key_cert_pairs.push_back({key, cert});
    credentials = grpc::SslServerCredentials(ssl);
  }
  std::vector<std::unique_ptr<int>> ports;
  for (const std::string& address : options_.listen) {
    ports.push_back(std::make_unique<int>(0));
    builder.AddListeningPort(address,
                             absl::StartsWith(address, "unix:") ? grpc::InsecureServerCredentials() : credentials,
                             ports.back().get());
  }
  service_ = std::make_unique<Service>(*this);
  builder.RegisterCallbackGenericService(service_.get());
  const mode_t old_umask = umask(0077);
  server_ = builder.BuildAndStart();
  umask(old_umask);
  if (!server_) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", absl::StrJoin(options_.listen, ", "),
                                               ": is the address in use, or unusable?"));
  }
  for (size_t i = 0; i < options_.listen.size(); ++i) {
    const std::string& address = options_.listen[i];
    listening_.push_back(absl::StartsWith(address, "unix:") || !absl::EndsWith(address, ":0")
                             ? address
                             : absl::StrCat(address.substr(0, address.size() - 1), *ports[i]));
  }
  fronts::AdminEndpoints admin;
  admin.render_metrics = [this] { return metrics_.Render(); };
  admin.readiness = [this]() -> absl::Status {
    for (const auto& node : nodes_->All()) {
      if (node->up() && !node->draining()) return absl::OkStatus();
    }
    return absl::UnavailableError("no node of the fleet is up and taking work");
  };
  fronts::HttpFrontsOptions fronts_options{.http_listen = options_.http_listen,
                                            .admin_listen = options_.admin_listen,
                                            .max_code_bytes = options_.max_code_bytes,
                                            .max_file_bytes = options_.max_file_bytes,
                                            .tokens_configured = true,
                                            .http = options_.http};
  fronts::TokenAuthenticator by_header = [this](const std::string& header) {
    return TenantFromAuthorization(tokens_, header);
  };
  ASSIGN_OR_RETURN(http_, fronts::HttpFronts::Start(fronts_options, *server_, by_header, std::move(admin)));
  if (std::string warning = http_->ConnectionBoundWarning(); !warning.empty()) spdlog::warn("{}", warning);
  return absl::OkStatus();
}

void Gateway::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  const absl::Time deadline = absl::Now() + grace;
  if (server_) server_->GetHealthCheckService()->SetServingStatus(false);
  // The HTTP fronts first: their handlers call the gRPC server in process,
  // and must be done with it before it goes (as wardend does).
  if (http_ && !http_->Drain(deadline)) spdlog::warn("HTTP requests were still running at shutdown");
  if (server_) {
    server_->Shutdown(absl::ToChronoTime(deadline));
    server_->Wait();
  }
  http_.reset();
  if (nodes_) nodes_->Stop();
}

}  // namespace warden::gateway
