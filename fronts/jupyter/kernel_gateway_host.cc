// kernel_gateway_host: the Kernel Gateway front on its own HTTP server, in
// front of a wardend reached over gRPC - the "gateway in front of a daemon"
// arrangement, used by the end-to-end tests until wardend hosts the front on
// --http-listen. The daemon authenticates every call (the token is forwarded
// as its "authorization"), so tenants, quotas and 401s are the daemon's.
//
//   kernel_gateway_host --upstream unix:/run/warden/wardend.sock --listen 127.0.0.1:8888
//
// Prints "listening on PORT" once serving; SIGTERM or SIGINT stops it.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "fronts/http/server.h"
#include "fronts/jupyter/kernel_gateway_http.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

int main(int argc, char** argv) {
  std::string upstream, listen = "127.0.0.1:0";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--upstream") == 0) upstream = argv[i + 1];
    if (std::strcmp(argv[i], "--listen") == 0) listen = argv[i + 1];
  }
  if (upstream.empty()) {
    std::fprintf(stderr, "usage: %s --upstream WARDEND_ADDRESS [--listen HOST:PORT]\n", argv[0]);
    return 2;
  }
  // Signals are taken by sigwait below, never by a thread at random.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  auto stub = std::shared_ptr<warden::v1::Executor::StubInterface>(
      warden::v1::Executor::NewStub(grpc::CreateChannel(upstream, grpc::InsecureChannelCredentials())));
  auto router = std::make_shared<warden::http::Router>();
  warden::jupyter::AddKernelGatewayRoutes(*router, std::make_shared<warden::jupyter::KernelGateway>(stub));
  warden::http::HttpServerOptions options;
  options.listen = listen;
  options.name = "Kernel Gateway";
  // The daemon checks the token on every forwarded call.
  auto server = warden::http::HttpServer::Start(
      options, router, [](absl::string_view) -> absl::StatusOr<std::string> { return std::string(); });
  if (!server.ok()) {
    std::fprintf(stderr, "kernel_gateway_host: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("listening on %d\n", (*server)->port());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop, &signal);
  (*server)->Stop();
  return 0;
}
