// Result: what one sandboxed run did. A timeout, an OOM kill or a crash is a
// normal Outcome; only SETUP_ERROR and INTERNAL mean Warden itself failed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace warden {

enum class Outcome {
  kOk,            // main process exited 0
  kNonzeroExit,   // main process exited with a non-zero code
  kSignaled,      // main process was killed by a signal it was not sent by us
  kWallTimeout,   // the wall-clock deadline passed
  kCpuTimeout,    // the CPU-time limit (all threads and children) was used up
  kMemoryLimit,   // the cgroup OOM-killed a process
  kOutputLimit,   // stdout or stderr passed its cap
  kViolation,     // a syscall outside the seccomp policy was attempted
  kSetupError,    // the sandbox could not be built (bad spec, host support)
  kInternal,      // Warden failed while the program ran
  // Cell-level outcomes of sessions (live kernels):
  kError,         // the cell raised / its last command failed; structured error attached
  kInterrupted,   // the cell was interrupted on request; the session lives on
  kSessionLost,   // the session's interpreter is gone; it stays lost until restarted
};

// "OK", "NONZERO_EXIT", ... as in the API and warden-run's JSON.
const char* OutcomeName(Outcome outcome);

struct Result {
  Outcome outcome = Outcome::kInternal;
  int exit_code = -1;  // when the main process exited, else -1
  int signal = 0;      // when the main process was killed by a signal, else 0
  int64_t wall_ms = 0;
  int64_t cpu_ms = 0;
  int64_t peak_memory_bytes = 0;
  std::string stdout_data;
  std::string stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::optional<std::string> violation;  // the syscall's name, for kViolation
  std::string message;  // what went wrong, for kSetupError / kInternal
};

}  // namespace warden
