// Connecting from the host to a port a sandbox's process listens on, on the
// sandbox's own loopback (an exposed port, egress_gate.h's other direction):
// a socket is made inside the sandbox's network namespace by a short-lived
// thread of ours that enters it (setns; the thread never comes back, so the
// daemon's other threads stay in the host's namespace whatever happens),
// and connected to 127.0.0.1 (or ::1) there. Nothing of the sandbox's runs;
// the sandbox only sees a connection from its own loopback.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sandbox/unique_fd.h"

namespace warden {

// A connected, non-blocking TCP socket to `port` in the network namespace of
// the sandbox whose init is `init_pid` (checked against `init_pidfd`, so a
// recycled pid cannot be another process's namespace). UNAVAILABLE with a
// message when nothing listens there, or the connect does not complete by
// `deadline`; FAILED_PRECONDITION when the sandbox is gone.
absl::StatusOr<UniqueFd> ConnectToSandboxPort(pid_t init_pid, int init_pidfd, uint16_t port, absl::Time deadline);

// A listening socket on 127.0.0.1:`port` in that sandbox's namespace, made
// the same way (an adopted sandbox's egress listener, egress_gate.h).
absl::StatusOr<UniqueFd> ListenInSandbox(pid_t init_pid, int init_pidfd, uint16_t port);

}  // namespace warden
