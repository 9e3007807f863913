// Where the life of a one-shot sandbox goes, stage by stage: N sandboxes of
// one language, one after the other, each started as wardend starts a pool
// worker (Python cloned from the zygote), running one cell and torn down.
// Prints one JSON object of per-stage medians (ms) for bench/run_bench.py.
// --recycle 0 builds every sandbox's namespaces and cgroup afresh (the A/B
// against recycling them, RecyclePool).
//   build/bin/sandbox_stages [--n N] [--language python|javascript|bash] [--zygote PATH]
//                            [--recycle 0|1]
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernel/language.h"
#include "kernel/session.h"
#include "kernel/zygote.h"
#include "nlohmann/json.hpp"
#include "sandbox/sandbox.h"

namespace {

// The stages in order, each from the end of the one before.
constexpr const char* kStages[] = {
    "plan",           // mount plan, seccomp program, rlimits
    "cgroup",         // create and limit the sandbox's cgroup
    "clone",          // clone the init into fresh namespaces (a fork server round trip for Python)
    "maps_go",        // id maps, join the cgroup, send "go"
    "containment",    // mounts, pivot_root, rlimits, caps, no_new_privs, seccomp (in the child)
    "kernel_ready",   // the interpreter's kernel says hello
    "run",            // one cell, print(1), round trip
    "teardown",       // kill, reap, remove the cgroup (the Disposer's work)
};

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

}  // namespace

int main(int argc, char** argv) {
  int n = 50;
  std::string language_name = "python";
  std::string zygote_program = warden::DefaultPythonZygoteProgram();
  bool recycle = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--n") n = std::max(1, atoi(argv[i + 1]));
    else if (flag == "--language") language_name = argv[i + 1];
    else if (flag == "--zygote") zygote_program = argv[i + 1];
    else if (flag == "--recycle") recycle = atoi(argv[i + 1]) != 0;
  }
  auto language = warden::ParseLanguage(language_name);
  if (!language.ok()) {
    fprintf(stderr, "%s\n", std::string(language.status().message()).c_str());
    return 2;
  }
  warden::ExecutorOptions executor_options;
  executor_options.recycle = recycle;
  auto executor = warden::Executor::Create(executor_options);
  if (!executor.ok()) {
    fprintf(stderr, "%s\n", std::string(executor.status().message()).c_str());
    return 1;
  }
  warden::SessionOptions options;
  options.language = *language;
  std::unique_ptr<warden::ForkServer> zygote;
  if (*language == warden::Language::kPython) {
    auto started = warden::StartPythonZygote(zygote_program, options.kernels_dir, {});
    if (!started.ok()) {
      fprintf(stderr, "%s\n", std::string(started.status().message()).c_str());
      return 1;
    }
    zygote = std::move(*started);
    options.fork_server = zygote.get();
  }
  const std::string code = *language == warden::Language::kPython       ? "print(1)"
                           : *language == warden::Language::kJavaScript ? "console.log(1)"
                                                                        : "echo 1";
  // CPU of this process and of the sandboxes' inits it reaps (their exit
  // tears down what they alone held). Namespace teardown deferred to a
  // kworker (a network namespace's cleanup_net) is not in it.
  auto cpu_ms = [] {
    double total = 0;
    for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
      struct rusage u = {};
      getrusage(who, &u);
      total += (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
               (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
    }
    return total;
  };
  const double cpu_before = cpu_ms();
  std::map<std::string, std::vector<double>> stages;
  std::vector<double> totals;
  int failures = 0;
  for (int i = 0; i < n; ++i) {
    const absl::Time begin = absl::Now();
    auto session = warden::Session::Start(**executor, options);
    if (!session.ok()) {
      ++failures;
      continue;
    }
    const warden::Session::StartTimes t = (*session)->start_times();
    const warden::CellResult cell = (*session)->Execute(code, warden::CellLimits{});
    const absl::Time ran = absl::Now();
    if (cell.outcome != warden::Outcome::kOk || cell.stdout_data != "1\n") ++failures;
    session->reset();
    const absl::Time end = absl::Now();
    const absl::Time marks[] = {t.sandbox.begin,  t.sandbox.planned,       t.sandbox.cgroup,
                                t.sandbox.cloned, t.sandbox.released,      t.sandbox.payload_ready,
                                t.kernel_ready,   ran,                     end};
    for (size_t s = 0; s < std::size(kStages); ++s) {
      stages[kStages[s]].push_back(Ms(marks[s + 1] - marks[s]));
    }
    totals.push_back(Ms(end - begin));
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  nlohmann::json out;
  out["language"] = language_name;
  out["n"] = n;
  out["failures"] = failures;
  out["order"] = std::vector<std::string>(std::begin(kStages), std::end(kStages));
  for (const auto& [name, values] : stages) out["p50_ms"][name] = median(values);
  out["total_p50_ms"] = median(totals);
  out["cpu_ms_per_sandbox"] = (cpu_ms() - cpu_before) / n;
  out["recycle"] = recycle;
  if (const warden::RecyclePool* pool = (*executor)->recycle_pool()) {
    const warden::RecyclePoolStats stats = pool->Stats();
    out["recycled"] = {{"namespaces_made", stats.namespaces_made},
                       {"namespaces_reused", stats.namespaces_reused},
                       {"net_dirty", stats.net_dirty},
                       {"ipc_dirty", stats.ipc_dirty},
                       {"cgroups_reused", stats.cgroups_reused}};
  }
  printf("%s\n", out.dump().c_str());
  return failures == 0 ? 0 : 1;
}
