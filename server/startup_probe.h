// The start-up probe: one worker of each configured language, started the
// way its pool starts them (cloned from the zygote for Python), once before
// wardend serves and again by `wardend --check`. A language whose worker
// cannot start is reported with the cause and what to do about it, so that a
// broken kernels_dir or a missing interpreter is said at once on stderr, not
// found later in a log line while the daemon looks healthy.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernel/session.h"

namespace warden {

struct WorkerProbe {
  Language language = Language::kPython;
  absl::Status status;  // OK: a worker started (and was closed again)
  absl::Duration took;
  std::string fix;      // what to do, when it failed
};

// Starts one worker of each profile, all at once, and waits for every one
// (each bounded by its start_timeout_ms). `executor` is not owned.
std::vector<WorkerProbe> ProbeWorkers(Executor& executor, const std::vector<SessionOptions>& profiles);

// What an operator can do about `failure` to start `profile`'s worker.
std::string HowToFix(const SessionOptions& profile, const absl::Status& failure);

bool AllStarted(const std::vector<WorkerProbe>& probes);

// One line per language, e.g. "  python: ok, started in 140 ms"; a failure
// adds its cause and an indented "fix:" line.
std::string FormatWorkerProbes(const std::vector<WorkerProbe>& probes);

}  // namespace warden
