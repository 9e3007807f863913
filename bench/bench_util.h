// Helpers shared by Warden's benchmark programs: latency samples and their
// summary, flag parsing, the workload file, judging a run, and spawning a
// process the way the anchors do (posix_spawn, output read to EOF, reaped).
// Benchmarks print figures; nothing here asserts on a number.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace warden::bench {

using Clock = std::chrono::steady_clock;

inline double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Summary of latency samples in milliseconds: n, p50, p90, p99, mean, min,
// max. Empty samples give {"n": 0}.
nlohmann::json Summarize(std::vector<double> ms);

// --name value flags after the subcommand, and everything after "--".
class Flags {
 public:
  Flags(int argc, char** argv, int first);
  std::string Str(const std::string& name, const std::string& fallback) const;
  int64_t Int(const std::string& name, int64_t fallback) const;
  double Double(const std::string& name, double fallback) const;
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  const std::vector<std::string>& rest() const { return rest_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> rest_;
};

// One program of a workload file (JSON lines, written by bench/run_bench.py):
//   {"id": "HumanEval/0", "language": "python", "code": "...",
//    "expect": "pass" | "fail", "judge": "ok" | "quiet"}
// judge "ok": it passes when it ran to the end normally; "quiet" (HumanEval-X
// JavaScript, whose console.assert only prints): when stdout and stderr are
// both empty, whatever the exit status.
struct Program {
  std::string id;
  std::string language;
  std::string code;
  bool expect_pass = true;
  bool judge_quiet = false;
};
std::vector<Program> LoadPrograms(const std::string& path);

// What a run of a program produced, for judging and reporting.
struct RunOutput {
  bool finished_normally = false;  // exit status 0 / OUTCOME_OK
  bool timed_out = false;          // killed at its time limit: never a pass
  std::string stdout_text;
  std::string stderr_text;
  std::string outcome;  // "OK", "ERROR", "WALL_TIMEOUT", "exit 1", ...
};
bool Passed(const Program& program, const RunOutput& out);

// Runs every program once, `clients` at a time, and reports the suite: each
// program judged (Passed) against what it was expected to do, the runs'
// latencies and the whole run's time. `make_client` is called on each
// client's thread and returns what runs one program there.
using RunProgram = std::function<void(const Program& program, RunOutput* out)>;
nlohmann::json RunSuite(const std::vector<Program>& programs, int clients,
                        const std::function<RunProgram()>& make_client);

// Runs argv (argv[0] is an absolute path) with stdin from /dev/null, reads
// its stdout and stderr to EOF, reaps it. A run past timeout_ms is killed.
// Returns false when the process could not be started.
bool SpawnAndWait(const std::vector<std::string>& argv, int64_t timeout_ms, RunOutput* out);

// Prints one JSON object on stdout, flushed: how every subcommand reports.
void Emit(const nlohmann::json& j);

}  // namespace warden::bench
