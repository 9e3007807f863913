// Helpers shared by the end-to-end sandbox tests: one Executor per test
// binary, and shortcuts to run programs with the test cases bound in.
#pragma once

#include <unistd.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sandbox/sandbox.h"

namespace warden {
// gtest prints outcomes by name.
inline void PrintTo(Outcome outcome, std::ostream* os) { *os << OutcomeName(outcome); }
}  // namespace warden

namespace warden::testing {

// Host ids of this test process's sandboxes: a range of its own, so that
// test binaries that ctest runs in parallel never see each other's processes.
struct IdRange {
  uid_t first;
  uint32_t count;
  bool Contains(long uid) const { return uid >= first && uid < first + static_cast<long>(count); }
};
inline IdRange TestIdRange() {
  // 1,024 ids per process: 512 for its executor, 512 for children it forks.
  static const IdRange range{static_cast<uid_t>(2'000'000 + (getpid() % 4096) * 1024), 512};
  return range;
}

// The process-wide executor (created on first use; aborts the test binary
// with the reason if this host cannot build sandboxes). Destroyed at exit,
// which removes its cgroup subtree.
inline Executor& TestExecutor() {
  static std::unique_ptr<Executor> executor = [] {
    ExecutorOptions options;
    options.host_id_base = TestIdRange().first;
    options.host_id_count = TestIdRange().count;
    auto created = Executor::Create(options);
    if (!created.ok()) {
      fprintf(stderr, "cannot create the sandbox executor: %s\n",
              std::string(created.status().message()).c_str());
      abort();
    }
    return std::move(*created);
  }();
  return *executor;
}

// A spec with the guest programs bound read-only at /testcases (sources)
// and /testbin (the compiled C programs).
inline SandboxSpec SpecFor(std::vector<std::string> argv, Limits limits = {}) {
  SandboxSpec spec;
  spec.argv = std::move(argv);
  spec.limits = limits;
  spec.filesystem.binds.push_back({WARDEN_TESTCASES_SRC, "/testcases", false});
  spec.filesystem.binds.push_back({WARDEN_TESTCASES_BIN, "/testbin", false});
  return spec;
}

inline SandboxSpec PythonSpec(const std::string& code, Limits limits = {}) {
  return SpecFor({"/usr/bin/python3", "-c", code}, limits);
}

inline Result Run(const SandboxSpec& spec) { return TestExecutor().Run(spec); }

// For failure messages: everything the run reported.
inline std::string Describe(const Result& r) {
  std::string s = std::string("outcome=") + OutcomeName(r.outcome) +
                  " exit_code=" + std::to_string(r.exit_code) +
                  " signal=" + std::to_string(r.signal) + " wall_ms=" + std::to_string(r.wall_ms) +
                  " cpu_ms=" + std::to_string(r.cpu_ms) + " peak_memory_bytes=" + std::to_string(r.peak_memory_bytes) +
                  " violation=" + (r.violation ? *r.violation : "none") + " message=" + r.message +
                  "\n--- stdout ---\n" + r.stdout_data.substr(0, 2000) + "\n--- stderr ---\n" +
                  r.stderr_data.substr(0, 2000);
  return s;
}

}  // namespace warden::testing
