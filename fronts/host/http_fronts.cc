#include "fronts/host/http_fronts.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "fronts/e2b/access_token.h"
#include "fronts/e2b/e2b_front.h"
#include "fronts/e2b/volumes.h"
#include "fronts/jupyter/kernel_gateway_http.h"
#include "fronts/mcp/mcp_http.h"
#include "fronts/ports/ports_front.h"
#include "grpcpp/support/channel_arguments.h"

namespace warden::fronts {

absl::StatusOr<std::unique_ptr<HttpFronts>> HttpFronts::Start(const HttpFrontsOptions& options, grpc::Server& server,
                                                             TokenAuthenticator authenticate, AdminEndpoints admin) {
  auto fronts = std::unique_ptr<HttpFronts>(new HttpFronts());
  fronts->authenticate_ = std::move(authenticate);
  // The same credential check as gRPC's "authorization" header, so a token
  // means the same tenant on every front.
  http::Authenticate by_token = [check = &fronts->authenticate_](absl::string_view token) {
    return (*check)(token.empty() ? std::string() : absl::StrCat("Bearer ", token));
  };
  const int64_t largest_file = options.max_file_bytes;
  http::HttpServerOptions http_options;
  // Code and files come in JSON, files base64-encoded (4/3 of their size).
  http_options.max_body_bytes = static_cast<size_t>(options.max_code_bytes + largest_file * 4 / 3 + (1 << 20));

  if (!options.http_listen.empty()) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    // One in-process channel for every front.
    std::shared_ptr<grpc::Channel> channel = server.InProcessChannel(args);
    fronts->executor_ = v1::Executor::NewStub(channel);
    mcp::McpToolsOptions tools_options;
    tools_options.max_download_bytes = largest_file;
    fronts->mcp_tools_ = std::make_unique<mcp::McpTools>(fronts->executor_.get(), tools_options);
    fronts->mcp_ = std::make_unique<mcp::McpServer>(*fronts->mcp_tools_);

    auto router = std::make_shared<http::Router>();
    AddAdminRoutes(*router, admin);
    mcp::McpHttpOptions mcp_options;
    mcp_options.max_body_bytes = http_options.max_body_bytes;
    mcp::AddMcpRoutes(*router, *fronts->mcp_, mcp_options);
    e2b::E2bOptions e2b_options;
    e2b_options.max_body_bytes = http_options.max_body_bytes;
    e2b_options.max_file_bytes = largest_file;
    e2b_options.max_signed_url = absl::Seconds(options.http.e2b_signed_url_max_seconds);
    e2b_options.authenticate = by_token;
    if (!options.http.e2b_key_file.empty()) {
      ASSIGN_OR_RETURN(e2b_options.access_key, e2b::ReadAccessKey(options.http.e2b_key_file));
    }
    e2b_options.sandbox_domain = options.http.sandbox_domain;
    e2b_options.allow_public_ports = options.http.allow_public_ports;
    e2b::TrafficTokenOpener e2b_tokens = e2b::AddE2bRoutes(*router, fronts->executor_.get(), e2b_options);
    // Sessions' exposed ports (E2B's getHost among them).
    ports::PortsOptions ports_options;
    ports_options.sandbox_domain = options.http.sandbox_domain;
    ports_options.open_e2b_token = std::move(e2b_tokens);
    ports::AddPortRoutes(*router, fronts->executor_.get(), ports_options);
    e2b::AddE2bRoutes(*router, fronts->executor_.get(), e2b_options);
    fronts->volumes_ = v1::Volumes::NewStub(channel);
    e2b::AddE2bVolumeRoutes(*router, fronts->volumes_.get(), e2b_options);
    fronts->kernel_gateway_ = std::make_shared<jupyter::KernelGateway>(
        std::shared_ptr<v1::Executor::StubInterface>(v1::Executor::NewStub(channel)));
    jupyter::AddKernelGatewayRoutes(*router, fronts->kernel_gateway_);

    http_options.listen = options.http_listen;
    // DNS rebinding: without tokens nothing but the Host tells a rebound
    // web page from a local client; listed hosts are checked always.
    const HttpSettings& http = options.http;
    http_options.access.check_host = !options.tokens_configured || !http.allowed_hosts.empty();
    http_options.access.allowed_hosts = http.allowed_hosts;
    http_options.access.allowed_origins = http.allowed_origins;
    http_options.head_timeout = absl::Milliseconds(http.head_timeout_ms);
    http_options.idle_timeout = absl::Milliseconds(http.idle_timeout_ms);
    http_options.max_connections = static_cast<int>(http.max_connections);
    http_options.max_streams_per_tenant = static_cast<int>(http.max_streams_per_tenant);
    http_options.io_threads = static_cast<int>(http.io_threads);
    http_options.handler_threads = static_cast<int>(http.handler_threads);
    http_options.max_body_bytes_in_flight = static_cast<size_t>(http.max_body_memory_mb) << 20;
    fronts->router_ = router;
    fronts->max_connections_ = http.max_connections;
    ASSIGN_OR_RETURN(fronts->http_, http::HttpServer::Start(http_options, router, by_token));
  }
  if (!options.admin_listen.empty()) {
    auto router = std::make_shared<http::Router>();
    AddAdminRoutes(*router, admin);
    http::HttpServerOptions admin_options;
    admin_options.listen = options.admin_listen;
    admin_options.name = "admin";
    admin_options.head_timeout = absl::Seconds(5);
    admin_options.max_header_bytes = 8 * 1024;
    admin_options.max_connections = 64;
    admin_options.io_threads = 1;
    admin_options.handler_threads = 1;  // its routes never block: they run on the I/O thread
    // Probes and scrapers name the port by the address they were given
    // (often not loopback), and the admin routes only read counters.
    admin_options.access.check_host = false;
    ASSIGN_OR_RETURN(fronts->admin_, http::HttpServer::Start(admin_options, router, by_token));
  }
  return fronts;
}

HttpFronts::~HttpFronts() { Stop(); }

std::string HttpFronts::ConnectionBoundWarning() const {
  if (http_ == nullptr || http_->max_connections() >= max_connections_) return "";
  return absl::StrCat("the HTTP front holds at most ", http_->max_connections(), " connections, not http.max_connections ",
                      max_connections_, ": RLIMIT_NOFILE is too low for more (raise LimitNOFILE, or ulimit -n)");
}

bool HttpFronts::Drain(absl::Time deadline) { return http_ == nullptr || http_->Drain(deadline); }

void HttpFronts::Stop() {
  if (http_) http_->Stop();
  if (admin_) admin_->Stop();
}

}  // namespace warden::fronts
