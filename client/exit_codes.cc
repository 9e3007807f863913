// Outcome -> exit status. Time limits exit 124 like timeout(1); Warden's own
// failures 125, also like timeout(1); resource kills mimic the signal a
// shell would report for them (128 + SIGKILL, SIGXFSZ, SIGSYS).
#include "client/exit_codes.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace warden::cli {
namespace {

// Codes that are not fixed: taken from the response.
constexpr int kProgramExitCode = -1;  // NONZERO_EXIT: the program's own status
constexpr int kSignalExitCode = -2;   // SIGNALED: 128 + the signal number
// ERROR: 1, or for a failed command without a traceback (a bash cell whose
// last command failed), that command's status.
constexpr int kErrorExitCode = -3;

struct OutcomeExit {
  v1::Outcome outcome;
  int code;
  absl::string_view shown;  // how --help shows the code
  absl::string_view meaning;
};

constexpr OutcomeExit kOutcomeExits[] = {
    {v1::OUTCOME_OK, 0, "0", "the code finished normally"},
    {v1::OUTCOME_ERROR, kErrorExitCode, "1 or N",
     "the code raised (traceback on stderr), or a bash cell failed with N"},
    {v1::OUTCOME_NONZERO_EXIT, kProgramExitCode, "N", "the program exited with status N (bash)"},
    {v1::OUTCOME_SIGNALED, kSignalExitCode, "128+N", "the program was killed by signal N"},
    {v1::OUTCOME_WALL_TIMEOUT, 124, "124", "the wall-clock limit passed"},
    {v1::OUTCOME_CPU_TIMEOUT, 124, "124", "the CPU-time limit was used up"},
    {v1::OUTCOME_SETUP_ERROR, kExitWardenFailure, "125", "the sandbox could not be built"},
    {v1::OUTCOME_INTERNAL, kExitWardenFailure, "125", "Warden failed"},
    {v1::OUTCOME_SESSION_LOST, 126, "126",
     "the session's interpreter is gone: 'warden session restart ID'"},
    {v1::OUTCOME_INTERRUPTED, 130, "130", "interrupted on request (as by Ctrl-C)"},
    {v1::OUTCOME_MEMORY_LIMIT, 137, "137", "the memory limit was hit (OOM kill)"},
    {v1::OUTCOME_OUTPUT_LIMIT, 153, "153", "stdout or stderr passed its cap"},
    {v1::OUTCOME_VIOLATION, 159, "159", "a forbidden system call (named on stderr)"},
};

const OutcomeExit* Find(v1::Outcome outcome) {
  for (const OutcomeExit& row : kOutcomeExits) {
    if (row.outcome == outcome) return &row;
  }
  return nullptr;
}

absl::string_view Name(v1::Outcome outcome) {
  absl::string_view name = v1::Outcome_Name(outcome);
  name.remove_prefix(absl::string_view("OUTCOME_").size());
  return name;
}

}  // namespace

int ExitCodeFor(const v1::ExecuteResponse& response) {
  const OutcomeExit* row = Find(response.outcome());
  if (row == nullptr) return kExitWardenFailure;  // UNSPECIFIED, or newer than this client
  int program_code = response.exit_code();
  // A status of 0 or out of range cannot stand for a failure: say 1.
  bool usable = program_code > 0 && program_code < 256;
  switch (row->code) {
    case kProgramExitCode:
      return usable ? program_code : 1;
    case kErrorExitCode:
      return usable && !response.has_error() ? program_code : 1;
    case kSignalExitCode:
      return response.signal() > 0 ? kExitSignalBase + (response.signal() & 0x7f)
                                   : kExitWardenFailure;
    default:
      return row->code;
  }
}

std::string ExitStatusHelp() {
  std::string text;
  auto row = [&text](absl::string_view code, absl::string_view name, absl::string_view meaning) {
    absl::StrAppendFormat(&text, "  %-6s %-13s %s\n", code, name, meaning);
  };
  for (const OutcomeExit& exit : kOutcomeExits) row(exit.shown, Name(exit.outcome), exit.meaning);
  row("125", "(gRPC error)", "the daemon refused the request or could not be reached");
  row("130", "(Ctrl-C)", "the execution was cancelled from here (143 for SIGTERM)");
  row("2", "(usage)", "bad usage, or a local file could not be read or written");
  return text;
}

}  // namespace warden::cli
