// The exit status of `warden exec`: one table from Outcome to exit code, and
// the --help text generated from that same table so the two cannot drift.
#pragma once

#include <string>

#include "warden/v1/executor.pb.h"

namespace warden::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;            // bad usage, or a local file we cannot use
inline constexpr int kExitWardenFailure = 125;  // a gRPC error, or Warden failed (like timeout(1))
inline constexpr int kExitSignalBase = 128;     // 128 + N: killed by (or cancelled on) signal N

// The exit status for a finished execution.
int ExitCodeFor(const v1::ExecuteResponse& response);

// The rows of the "exit status" section of --help, one line per table row.
std::string ExitStatusHelp();

}  // namespace warden::cli
