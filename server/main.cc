// wardend: Warden's daemon. Parses flags and the configuration file into
// DaemonOptions, then Daemon::Create / Start, and waits for SIGTERM or
// SIGINT to shut down gracefully.
//
//   wardend [--config FILE] [--listen ADDR ...] [--http-listen HOST:PORT]
//           [--admin-listen HOST:PORT]
//           [--allow-degraded] [--drop-sessions] [--log-format text|json] [--check]
//           [--llm-base-url URL --llm-model NAME]
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "agent/agent_service.h"
#include "common/server_process.h"
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
    "  --state-dir DIR        lock and crash-recovery record (default: the UNIX socket's\n"
    "                         directory, /run/warden)\n"
    "  --drop-sessions        under warden-keeper: end every session it holds instead of\n"
    "                         adopting them (docs/operations.md)\n"
    "  --log-format F         text (default) or json\n"
    "  --llm-base-url URL     the agent's OpenAI-compatible model server, e.g.\n"
    "                         http://127.0.0.1:8000/v1 (docs/agent.md)\n"
    "  --llm-model NAME       the model the agent asks for\n"
    "  --check                print what this host supports, whether the configuration\n"
    "                         can be honoured and whether a worker of each configured\n"
    "                         language starts, then exit (non-zero if not)\n";

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

// A worker that cannot start at start-up is said on stderr, where whoever
// started wardend looks, with the cause and the fix, and not only in the log.
void ReportProbeFailures(const std::vector<warden::WorkerProbe>& probes, bool text) {
  for (const warden::WorkerProbe& probe : probes) {
    if (probe.status.ok()) continue;
    spdlog::error("{} workers cannot start: {} (fix: {})", warden::LanguageName(probe.language),
                  std::string(probe.status.message()), probe.fix);
  }
  if (!text) return;
  std::cerr << "\nwardend cannot start every kind of worker:\n" << warden::FormatWorkerProbes(probes)
            << "It serves, but requests for the failing languages get UNAVAILABLE with the cause,\n"
            << "and readiness (/readyz, grpc.health.v1.Health) reports NOT_SERVING while a pool\n"
            << "cannot start any worker. `wardend --check` repeats this probe.\n\n";
}

// `wardend --check` from a root shell on a cgroup v2 host under systemd: the
// shell's cgroup (its session scope) holds the shell too, so no controller
// can be enabled there (the no-internal-processes rule) and the check would
// fail where the unit, with a cgroup of its own, works. The check then runs
// again, as the unit does, in a transient scope with Delegate=yes
// (systemd-run --scope execs it in this process, terminal and all). Returns
// only if it does not; the check then runs here.
void CheckFromAScopeOfItsOwn(const warden::CgroupOptions& cgroup, int argc, char** argv) {
  if (getenv("WARDEN_CHECK_SCOPE") != nullptr || geteuid() != 0 || access("/run/systemd/system", F_OK) != 0) {
    return;
  }
  const std::string problem = warden::CgroupManager::SharedCgroupProblem(cgroup);
  if (problem.empty()) return;
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return;
  self[len] = '\0';
  std::cout << "note: " << problem
            << ";\n  checking from a transient systemd scope with Delegate=yes instead, as the unit runs wardend\n"
            << std::flush;
  setenv("WARDEN_CHECK_SCOPE", "1", 1);
  std::vector<char*> args = {const_cast<char*>("systemd-run"), const_cast<char*>("--scope"),
                             const_cast<char*>("--quiet"),     const_cast<char*>("--collect"),
                             const_cast<char*>("--property=Delegate=yes"), const_cast<char*>("--"), self};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::cout << "note: cannot run systemd-run (" << strerror(errno) << "); checking from here\n";
}

}  // namespace

int main(int argc, char** argv) {
  warden::ConfigureServerProcess();  // common/server_process.h
  std::string config;
  std::vector<std::string> listen;
  std::string admin_listen, http_listen;
  bool check = false, degraded = false, insecure_loopback = false, drop_sessions = false;
  std::string log_format, llm_base_url, llm_model, state_dir;
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
    } else if (arg == "--drop-sessions") {
      drop_sessions = true;
    } else if (arg == "--allow-degraded") {
      degraded = true;
    } else if (arg == "--allow-insecure-loopback") {
      insecure_loopback = true;
    } else if (arg == "--config" || arg == "--listen" || arg == "--admin-listen" || arg == "--http-listen" ||
               arg == "--log-format" || arg == "--llm-base-url" || arg == "--llm-model" ||
               arg == "--state-dir") {
      const char* v = value(arg.c_str());
      if (!v) return Usage(arg + " needs a value");
      if (arg == "--config") config = v;
      if (arg == "--listen") listen.push_back(v);
      if (arg == "--admin-listen") admin_listen = v;
      if (arg == "--http-listen") http_listen = v;
      if (arg == "--log-format") log_format = v;
      if (arg == "--llm-base-url") llm_base_url = v;
      if (arg == "--llm-model") llm_model = v;
      if (arg == "--state-dir") state_dir = v;
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
  if (!state_dir.empty()) options.state_dir = state_dir;
  options.drop_sessions = drop_sessions;
  // A fleet's engine names the node and the process (docs/fleet.md).
  if (const char* node = getenv("WARDEN_NODE_ID"); node != nullptr && *node != '\0') {
    auto id = warden::FleetOptions::NodeIdFrom(node);
    if (!id.ok()) {
      std::cerr << "wardend: WARDEN_NODE_ID: " << id.status().message() << "\n";
      return 2;
    }
    options.fleet.node_id = *id;
    options.fleet.node_name = node;
  }
  if (const char* epoch = getenv("WARDEN_EPOCH"); epoch != nullptr) options.fleet.epoch = epoch;

  if (check) {
    CheckFromAScopeOfItsOwn(options.executor.cgroup, argc, argv);
    warden::HostCheck host = warden::CheckHost(options.executor.cgroup, options.executor.allow_degraded);
    std::cout << host.Format();
    if (!host.ok() && !warden::CgroupManager::SharedCgroupProblem(options.executor.cgroup).empty()) {
      std::cout << "note: this process's cgroup holds other processes; check as the unit runs wardend: "
                   "systemd-run --scope -p Delegate=yes wardend --check ...\n";
    }
    absl::Status valid = options.Validate();
    std::cout << (valid.ok() ? "configuration: ok" : "configuration: INVALID: " + std::string(valid.message()))
              << "\n";
    if (!host.ok() || !valid.ok()) {
      std::cout << "workers: not probed (fix the above first)\n";
      return 1;
    }
    {
      // The refill path's ceiling: how many sandboxes this host builds and
      // tears down per second (the pools' capacity is this or less).
      // A subtree of its own, so that the check runs beside a live wardend.
      warden::ExecutorOptions probe = options.executor;
      if (!probe.cgroup.subtree_name.empty()) probe.cgroup.subtree_name += "-check";
      auto rate = warden::MeasureSandboxRate(probe, absl::Seconds(1));
      if (rate.ok()) {
        std::cout << "capacity: about " << static_cast<int>(rate->per_second)
                  << " empty sandboxes per second built and torn down on " << rate->threads
                  << " cores" << (rate->failures ? " (some failed: see warden-run --check)" : "")
                  << "; a pool refills at most this fast, less the interpreter's start\n";
      } else {
        std::cout << "capacity: not measured: " << rate.status().message() << "\n";
      }
    }
    // The start-up probe itself: a daemon that does not listen, one worker
    // of each configured language. Its log goes to stderr.
    SetUpLogging(options.log);
    auto daemon = warden::Daemon::Create(options, warden::Daemon::Mode::kProbe);
    if (!daemon.ok()) {
      std::cout << "workers: not probed: " << daemon.status().message() << "\n";
      return 1;
    }
    const std::vector<warden::WorkerProbe> probes = (*daemon)->Probe();
    std::cout << "workers:\n" << warden::FormatWorkerProbes(probes);
    return warden::AllStarted(probes) ? 0 : 1;
  }

  SetUpLogging(options.log);
  // Every thread inherits this mask; the main thread takes the signals with
  // sigwait. (Sandboxed programs get an empty mask back before execve.)
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto daemon = warden::Daemon::Create(options);
  if (!daemon.ok()) {
    spdlog::critical("{}", std::string(daemon.status().message()));
    return 1;
  }
  auto agent = warden::agent::AgentService::Create(options.agent, (*daemon)->engine(),
                                                  (*daemon)->tenancy(), (*daemon)->tasks());
  if (!agent.ok()) {
    spdlog::critical("{}", std::string(agent.status().message()));
    return 1;
  }
  (*daemon)->AddService(std::move(*agent));
  const std::vector<warden::WorkerProbe> probes = (*daemon)->Probe();
  if (auto s = (*daemon)->Start(); !s.ok()) {
    spdlog::critical("{}", std::string(s.message()));
    return 1;
  }
  spdlog::info("wardend listening on {}", absl::StrJoin((*daemon)->listening(), ", "));
  if ((*daemon)->admin_port() != 0) {
    spdlog::info("admin HTTP (/metrics, /healthz, /readyz) on port {}", (*daemon)->admin_port());
  }
  // With JSON logs stderr is for machines: no free text beside the lines.
  const bool text = options.log.format != "json";
  if (!warden::AllStarted(probes)) {
    ReportProbeFailures(probes, text);
  } else if (text) {
    PrintHowToReachIt((*daemon)->listening().front());
  }

  for (;;) {
    // Between signals, every 5 s, what the allocator holds free goes back to
    // the system: glibc keeps memory freed by a thread in that thread's
    // arena (request bodies, upload pieces, listings), where only the top
    // of each is returned by itself. After issue 29's adversarial suite
    // (tests/tenant_starvation_test.cc) wardend held 56 MiB, 23 MiB of it
    // free in arenas; trimmed, 33 MiB. A trim walks the free lists: well
    // under a millisecond at these sizes.
    const timespec every = {5, 0};
    const int sig = sigtimedwait(&signals, nullptr, &every);
    if (sig < 0) {
      if (errno == EAGAIN) malloc_trim(0);
      continue;
    }
    if (sig == SIGHUP) continue;  // no reload yet
    // A node of a fleet hands its sessions over to the others (SIGTERM is
    // what an engine's drain, rolling update or scale-down sends).
    if (sig != SIGUSR1 && options.fleet.enabled()) {
      spdlog::info("signal {}: draining (grace {} ms)", sig, options.shutdown_grace_ms);
      (*daemon)->Drain(absl::Milliseconds(options.shutdown_grace_ms));
      break;
    }
    // Under warden-keeper, SIGTERM (and SIGINT) hand the sessions on to the
    // next wardend unless keep_sessions is off; SIGUSR1 (the keeper's stop
    // for real) always ends them.
    if (sig != SIGUSR1 && options.keep_sessions && (*daemon)->Detach()) {
      spdlog::info("signal {}: exiting; warden-keeper starts the next wardend", sig);
      spdlog::default_logger()->flush();
      _exit(0);  // nothing torn down: the sessions live on
    }
    spdlog::info("signal {}: shutting down (grace {} ms)", sig, options.shutdown_grace_ms);
    break;
  }
  (*daemon)->Shutdown(absl::Milliseconds(options.shutdown_grace_ms));
  spdlog::info("stopped");
  return 0;
}
