// warden-gateway: the front door of a fleet of wardend nodes (docs/fleet.md).
//
//   warden-gateway --config /etc/warden/warden-gateway.json
//
// It serves warden.v1 (and, with http_listen, the HTTP fronts) exactly as
// wardend does, placing new work on the nodes by load and routing every
// call on a session to the node that holds it. SIGTERM or SIGINT stops it.
#include <signal.h>

#include <iostream>
#include <string>

#include "absl/strings/str_join.h"
#include "common/server_process.h"
#include "gateway/gateway.h"
#include "spdlog/spdlog.h"

namespace {

int Usage(const std::string& problem) {
  if (!problem.empty()) std::cerr << "warden-gateway: " << problem << "\n";
  std::cerr << "usage: warden-gateway --config FILE [--listen HOST:PORT] [--http-listen HOST:PORT]\n"
               "  Serves warden.v1 in front of a fleet of wardend nodes; docs/fleet.md documents FILE.\n";
  return problem.empty() ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  warden::ConfigureServerProcess();  // common/server_process.h
  std::string config;
  std::string listen;
  std::string http_listen;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return Usage("");
    if (i + 1 >= argc) return Usage(arg + " needs a value");
    const std::string value = argv[++i];
    if (arg == "--config") {
      config = value;
    } else if (arg == "--listen") {
      listen = value;
    } else if (arg == "--http-listen") {
      http_listen = value;
    } else {
      return Usage("unknown option " + arg);
    }
  }
  if (config.empty()) return Usage("--config FILE is required");
  auto options = warden::gateway::GatewayOptions::FromFile(config);
  if (!options.ok()) {
    std::cerr << "warden-gateway: " << options.status().message() << "\n";
    return 2;
  }
  if (!listen.empty()) options->listen = {listen};
  if (!http_listen.empty()) options->http_listen = http_listen;
  spdlog::set_level(spdlog::level::from_str(options->log_level));

  // Every thread inherits this mask; the main thread takes the signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto gateway = warden::gateway::Gateway::Create(*options);
  if (!gateway.ok()) {
    spdlog::critical("{}", std::string(gateway.status().message()));
    return 1;
  }
  if (auto s = (*gateway)->Start(); !s.ok()) {
    spdlog::critical("{}", std::string(s.message()));
    return 1;
  }
  spdlog::info("warden-gateway listening on {}{}", absl::StrJoin((*gateway)->listening(), ", "),
               (*gateway)->http_port() ? " (HTTP fronts on port " + std::to_string((*gateway)->http_port()) + ")"
                                       : "");
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  (*gateway)->Shutdown(absl::Seconds(10));
  return 0;
}
