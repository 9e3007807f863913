// EgressGate: where a sandbox's only way out is served. Every sandbox's init
// opens a listening TCP socket on its own loopback (127.0.0.1:kEgressPort,
// in the sandbox's network namespace, before the program starts) and hands
// it to the supervisor, which gives it to the sandbox's gate: the egress
// proxy (egress/proxy.h) accepts the sandbox's connections there. The
// socket lives in that sandbox's namespace alone, so whatever arrives on it
// comes from that sandbox: the proxy knows whose connection it is without
// believing anything the sandbox says. Processes inside reach it as
// HTTP_PROXY (SandboxSpec::DefaultEnvironment).
#pragma once

#include "sandbox/unique_fd.h"

namespace warden {

inline constexpr int kEgressPort = 3128;

class EgressGate {
 public:
  virtual ~EgressGate() = default;
  // A new sandbox's listener (replacing any earlier sandbox's). Called by
  // the Worker when the sandbox reports it; any thread.
  virtual void Open(UniqueFd listener) = 0;
  // The sandbox ends: stop accepting and end its connections, before its
  // namespaces are reused. Returns once the listener is closed; any thread.
  virtual void Close() = 0;
};

}  // namespace warden
