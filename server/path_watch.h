// WatchPath: following changes under a directory of a session's machine.
//
// The watch runs inside the machine: warden-watch (tools/warden_watch.cc),
// one more process there, as the sandbox's user, under its seccomp policy,
// holding its inotify watches (counted against the sandbox's user, not the
// daemon's). Its records become WatchEvents, each with the entry as it is
// now, until the client goes away or the directory goes.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "warden/v1/executor.pb.h"

namespace warden {

class Engine;
class Cancellation;

// Where warden-watch is inside every machine, and on the host: beside the
// running program (build/bin, or where `make install` put both), else the
// one this build made; empty if there is none.
inline constexpr char kWatchProgramInSandbox[] = "/opt/warden/libexec/warden-watch";
std::string HostWatchProgram();

// Runs one WatchPath call to its end: `emit` gets `started`, then the
// events (each with its `entry` as it is now, when `with_entries`);
// returns when `cancellation` fires (OK) or the watch ends.
absl::Status WatchSessionPath(Engine& engine, const std::string& tenant, const v1::WatchPathRequest& request,
                              Cancellation& cancellation, const std::function<void(v1::WatchEvent)>& emit,
                              bool with_entries = true);

}  // namespace warden
