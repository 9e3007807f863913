// warden-run: runs one program in a fresh Warden sandbox, like nsjail's
// command line. For operators, for tests, and to check the sandbox layer
// from outside. Exit status: 0 when the sandbox ran (whatever the program
// did), 2 for bad usage, 3 when Warden itself failed.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "sandbox/host_check.h"
#include "sandbox/sandbox.h"

namespace {

constexpr char kUsage[] =
    "usage: warden-run [options] -- PROGRAM [ARGS...]\n"
    "       warden-run --check\n"
    "\n"
    "Runs PROGRAM in a fresh sandbox (own user, pid, mount, net, ipc, uts and cgroup\n"
    "namespaces; read-only root; seccomp; cgroup limits), with stdin passed through.\n"
    "\n"
    "  --memory-mb N      memory limit, swap excluded (default 512)\n"
    "  --pids N           process/thread limit (default 64)\n"
    "  --cpu-ms N         CPU time, all threads and children (default 10000)\n"
    "  --wall-ms N        wall clock (default 10000)\n"
    "  --output-bytes N   cap on each of stdout and stderr (default 1048576)\n"
    "  --tmpfs-mb N       size of each of /tmp, /dev/shm, /workspace (default 64)\n"
    "  --cpu-percent N    CPU bandwidth, 100 = one core (default 100)\n"
    "  --bind SRC:DST     extra read-only bind of host SRC at DST\n"
    "  --bind-rw SRC:DST  extra writable bind\n"
    "  --workspace DIR    bind host DIR writable as /workspace instead of a tmpfs\n"
    "  --env KEY=VALUE    add to the sandbox's environment\n"
    "  --cwd PATH         working directory inside (default /workspace)\n"
    "  --json             print one JSON object with the result\n"
    "  --allow-degraded   run without cgroups (rlimits only; not for hostile code)\n"
    "  --check            print what this host supports; exit non-zero if no sandbox\n";

int Usage(const std::string& error) {
  std::cerr << "warden-run: " << error << "\n\n" << kUsage;
  return 2;
}

bool ParseInt(const char* text, int64_t* out) { return absl::SimpleAtoi(text, out) && *out >= 0; }

}  // namespace

int main(int argc, char** argv) {
  warden::SandboxSpec spec;
  warden::ExecutorOptions options;
  bool json = false, check = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--json") {
      json = true;
      continue;
    }
    if (arg == "--check") {
      check = true;
      continue;
    }
    if (arg == "--allow-degraded") {
      options.allow_degraded = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) break;  // the program, without "--"
    if (i + 1 >= argc) return Usage(arg + " needs a value");
    const char* value = argv[++i];
    int64_t n = 0;
    auto number = [&](int64_t* field, int64_t scale) -> bool {
      if (!ParseInt(value, &n)) return false;
      *field = n * scale;
      return true;
    };
    bool ok = true;
    if (arg == "--memory-mb") ok = number(&spec.limits.memory_bytes, 1 << 20);
    else if (arg == "--pids") ok = number(&spec.limits.pids, 1);
    else if (arg == "--cpu-ms") ok = number(&spec.limits.cpu_ms, 1);
    else if (arg == "--wall-ms") ok = number(&spec.limits.wall_ms, 1);
    else if (arg == "--output-bytes") ok = number(&spec.limits.output_bytes, 1);
    else if (arg == "--tmpfs-mb") ok = number(&spec.limits.tmpfs_bytes, 1 << 20);
    else if (arg == "--cpu-percent") ok = number(&spec.limits.cpu_percent, 1);
    else if (arg == "--bind" || arg == "--bind-rw") {
      std::string v = value;
      size_t colon = v.find(':');
      if (colon == std::string::npos) return Usage(arg + " takes SRC:DST");
      spec.filesystem.binds.push_back({v.substr(0, colon), v.substr(colon + 1), arg == "--bind-rw"});
    } else if (arg == "--workspace") spec.filesystem.workspace_source = value;
    else if (arg == "--env") {
      if (std::string(value).find('=') == std::string::npos) return Usage("--env takes KEY=VALUE");
      spec.env.push_back(value);
    } else if (arg == "--cwd") spec.cwd = value;
    else return Usage("unknown option " + arg);
    if (!ok) return Usage(absl::StrCat(arg, " takes a non-negative whole number, not '", value, "'"));
  }

  if (check) {
    warden::HostCheck result = warden::CheckHost(options.cgroup, options.allow_degraded);
    std::cout << result.Format();
    return result.ok() ? 0 : 1;
  }
  if (i >= argc) return Usage("no program given");
  for (; i < argc; ++i) spec.argv.push_back(argv[i]);
  spec.stdin_fd = STDIN_FILENO;

  auto executor = warden::Executor::Create(options);
  if (!executor.ok()) {
    std::cerr << "warden-run: " << executor.status().message() << "\n";
    return 3;
  }
  warden::Result r = (*executor)->Run(spec);
  const bool warden_failed =
      r.outcome == warden::Outcome::kSetupError || r.outcome == warden::Outcome::kInternal;

  if (json) {
    nlohmann::json j;
    j["outcome"] = warden::OutcomeName(r.outcome);
    j["exit_code"] = r.exit_code;
    j["signal"] = r.signal;
    j["stdout"] = r.stdout_data;
    j["stderr"] = r.stderr_data;
    j["wall_ms"] = r.wall_ms;
    j["cpu_ms"] = r.cpu_ms;
    j["peak_memory_bytes"] = r.peak_memory_bytes;
    j["stdout_truncated"] = r.stdout_truncated;
    j["stderr_truncated"] = r.stderr_truncated;
    j["violation"] = r.violation ? nlohmann::json(*r.violation) : nlohmann::json(nullptr);
    j["message"] = r.message;
    // Program output may be any bytes: invalid UTF-8 becomes U+FFFD.
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    fwrite(r.stdout_data.data(), 1, r.stdout_data.size(), stdout);
    fwrite(r.stderr_data.data(), 1, r.stderr_data.size(), stderr);
    fflush(stdout);
    fprintf(stderr, "warden-run: %s exit_code=%d signal=%d wall_ms=%lld cpu_ms=%lld peak_memory=%lld%s%s%s\n",
            warden::OutcomeName(r.outcome), r.exit_code, r.signal,
            static_cast<long long>(r.wall_ms), static_cast<long long>(r.cpu_ms),
            static_cast<long long>(r.peak_memory_bytes),
            r.violation ? (" violation=" + *r.violation).c_str() : "",
            r.message.empty() ? "" : " - ", r.message.c_str());
  }
  return warden_failed ? 3 : 0;
}
