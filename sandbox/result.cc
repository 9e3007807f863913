#include "sandbox/result.h"

namespace warden {

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk: return "OK";
    case Outcome::kNonzeroExit: return "NONZERO_EXIT";
    case Outcome::kSignaled: return "SIGNALED";
    case Outcome::kWallTimeout: return "WALL_TIMEOUT";
    case Outcome::kCpuTimeout: return "CPU_TIMEOUT";
    case Outcome::kMemoryLimit: return "MEMORY_LIMIT";
    case Outcome::kOutputLimit: return "OUTPUT_LIMIT";
    case Outcome::kViolation: return "VIOLATION";
    case Outcome::kSetupError: return "SETUP_ERROR";
    case Outcome::kInternal: return "INTERNAL";
    case Outcome::kError: return "ERROR";
    case Outcome::kInterrupted: return "INTERRUPTED";
    case Outcome::kSessionLost: return "SESSION_LOST";
  }
  return "INTERNAL";
}

}  // namespace warden
