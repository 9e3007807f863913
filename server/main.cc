// wardend: Warden's daemon. Parses flags and the configuration file into
// DaemonOptions, then Daemon::Create / Start, and waits for SIGTERM or
// SIGINT to shut down gracefully.
//
//   wardend [--config FILE] [--listen ADDR ...] [--http-listen HOST:PORT]
//           [--admin-listen HOST:PORT]
//           [--allow-degraded] [--log-format text|json] [--check]
//           [--llm-base-url URL --llm-model NAME]
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "agent/agent_service.h"
#include "sandbox/host_check.h"
#include "server/daemon.h"
#include "server/json_log.h"
#include "server/options.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace {

constexpr char kUsage[] =
    "usage: wardend [options]\n"
    "\n"
    "Warden's daemon: runs untrusted code in isolated sandboxes behind a gRPC API\n"
    "(warden.v1.Executor). With no options it runs on built-in defaults, listening\n"
    "on unix:/run/warden/wardend.sock.\n"
    "\n"
    "  --config FILE          JSON configuration (docs/operations.md); flags override it\n"
    "  --listen ADDR          unix:PATH or HOST:PORT; repeatable; replaces the configured list\n"
    "  --http-listen H:P      the HTTP front: MCP at /mcp, and /metrics, /healthz and /readyz\n"
    "                         (docs/integrations.md)\n"
    "  --admin-listen H:P     only /metrics, /healthz and /readyz, on a port of their own\n"
    "  --allow-insecure-loopback  allow plain-text TCP on loopback (testing)\n"
    "  --allow-degraded       run without writable cgroups (rlimits only; not for hostile code)\n"
    "  --log-format F         text (default) or json\n"
    "  --llm-base-url URL     the agent's OpenAI-compatible model server, e.g.\n"
    "                         http://127.0.0.1:8000/v1 (docs/agent.md)\n"
    "  --llm-model NAME       the model the agent asks for\n"
    "  --check                print what this host supports and whether the configuration\n"
    "                         can be honoured, then exit (non-zero if not)\n";

int Usage(const std::string& error) {
  std::cerr << "wardend: " << error << "\n\n" << kUsage;
  return 2;
}

void SetUpLogging(const warden::LogOptions& log) {
  auto logger = spdlog::stderr_logger_mt("wardend");
  if (log.format == "json") {
    logger->set_formatter(warden::JsonLogFormatter());
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  }
  logger->set_level(spdlog::level::from_str(log.level));
  spdlog::set_default_logger(logger);
}

void PrintHowToReachIt(const std::string& address) {
  // The CLI sits next to wardend (build/bin, or the install prefix's bin).
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string cli = "warden";
  if (len > 0) {
    const std::string exe(self, static_cast<size_t>(len));
    cli = exe.substr(0, exe.rfind('/') + 1) + "warden";
  }
  std::cerr << "\nwardend is running. Try it:\n"
            << "  " << cli << " --addr " << address
            << " exec - <<< 'print(\"hello from the sandbox\")'\n"
            << "Stop it with Ctrl-C (SIGINT) or SIGTERM.\n\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string config;
  std::vector<std::string> listen;
  std::string admin_listen, http_listen;
  bool check = false, degraded = false, insecure_loopback = false;
  std::string log_format, llm_base_url, llm_model;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)name;
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--check") {
      check = true;
    } else if (arg == "--allow-degraded") {
      degraded = true;
    } else if (arg == "--allow-insecure-loopback") {
      insecure_loopback = true;
    } else if (arg == "--config" || arg == "--listen" || arg == "--admin-listen" || arg == "--http-listen" ||
               arg == "--log-format" ||
               arg == "--llm-base-url" || arg == "--llm-model") {
      const char* v = value(arg.c_str());
      if (!v) return Usage(arg + " needs a value");
      if (arg == "--config") config = v;
      if (arg == "--listen") listen.push_back(v);
      if (arg == "--admin-listen") admin_listen = v;
      if (arg == "--http-listen") http_listen = v;
      if (arg == "--log-format") log_format = v;
      if (arg == "--llm-base-url") llm_base_url = v;
      if (arg == "--llm-model") llm_model = v;
    } else {
      return Usage("unknown option " + arg);
    }
  }

  warden::DaemonOptions options;
  if (!config.empty()) {
    auto loaded = warden::DaemonOptions::FromFile(config);
    if (!loaded.ok()) {
      std::cerr << "wardend: " << loaded.status().message() << "\n";
      return 2;
    }
    options = *loaded;
  }
  if (!listen.empty()) options.listen = listen;
  if (!admin_listen.empty()) options.admin_listen = admin_listen;
  if (!http_listen.empty()) options.http_listen = http_listen;
  if (!log_format.empty()) options.log.format = log_format;
  if (degraded) options.executor.allow_degraded = true;
  if (insecure_loopback) options.allow_insecure_loopback = true;
  if (!llm_base_url.empty()) options.agent.llm.base_url = llm_base_url;
  if (!llm_model.empty()) options.agent.llm.model = llm_model;

  if (check) {
    warden::HostCheck host = warden::CheckHost(options.executor.cgroup, options.executor.allow_degraded);
    std::cout << host.Format();
    absl::Status valid = options.Validate();
    std::cout << (valid.ok() ? "configuration: ok" : "configuration: INVALID: " + std::string(valid.message()))
              << "\n";
    return host.ok() && valid.ok() ? 0 : 1;
  }

  SetUpLogging(options.log);
  // Every thread inherits this mask; the main thread takes the signals with
  // sigwait. (Sandboxed programs get an empty mask back before execve.)
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto daemon = warden::Daemon::Create(options);
  if (!daemon.ok()) {
    spdlog::critical("{}", std::string(daemon.status().message()));
    return 1;
  }
  auto agent = warden::agent::AgentService::Create(options.agent, (*daemon)->engine(),
                                                  (*daemon)->authenticator(), (*daemon)->tasks());
  if (!agent.ok()) {
    spdlog::critical("{}", std::string(agent.status().message()));
    return 1;
  }
  (*daemon)->AddService(std::move(*agent));
  if (auto s = (*daemon)->Start(); !s.ok()) {
    spdlog::critical("{}", std::string(s.message()));
    return 1;
  }
  spdlog::info("wardend listening on {}", absl::StrJoin((*daemon)->listening(), ", "));
  // With JSON logs stderr is for machines: no free text beside the lines.
  if (options.log.format != "json") PrintHowToReachIt((*daemon)->listening().front());

  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) continue;  // no reload yet
    spdlog::info("signal {}: shutting down (grace {} ms)", sig, options.shutdown_grace_ms);
    break;
  }
  (*daemon)->Shutdown(absl::Milliseconds(options.shutdown_grace_ms));
  spdlog::info("stopped");
  return 0;
}
