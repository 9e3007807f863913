// Rules: everything the proxy enforces for one sandbox's connections at a
// moment - the tenant's ceiling, the session's (or its pool's) policy, the
// limits - and the decision for one target, which both levels must allow.
// A channel holds one Rules at a time and swaps it whole (UpdateNetwork).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "egress/destination.h"
#include "egress/policy.h"

namespace warden::egress {

struct Limits {
  int64_t max_bytes = 0;        // both directions, over the sandbox's life; 0: none
  int max_connections = 0;      // open at once; 0: none
};

struct Rules {
  // Set: nothing goes out, and every attempt is answered with this (why the
  // sandbox has no network and which setting gives it one).
  std::string closed;
  // The operator's ceiling for the tenant, and where it is set
  // ("egress.tenants.team-a" or "egress.default_ceiling"), for messages.
  std::shared_ptr<const Policy> ceiling;
  std::string ceiling_source;
  // The session's own policy, or its pool's, and what it is
  // ("session s-1's network policy"), for messages.
  std::shared_ptr<const Policy> policy;
  std::string policy_source;
  Limits limits;

  // A Rules that refuses everything with `why`.
  static std::shared_ptr<const Rules> Closed(std::string why);
};

// The decision for one target, in two steps: Admit before resolving (a
// name refused here is never resolved), then AdmitAddress for each address
// it resolved to (or the literal). PermissionDenied with a message that
// names the level and the entry that refused, and what would allow it.
class Decision {
 public:
  Decision(const Rules& rules, const Host& host, uint16_t port);
  absl::Status Admit();
  // Whether the host must be resolved (a name) - after Admit is OK.
  bool needs_resolving() const { return !host_.address.has_value(); }
  absl::Status AdmitAddress(const Address& address) const;

 private:
  const Rules& rules_;
  const Host host_;
  const uint16_t port_;
  Policy::NameVerdict ceiling_ = Policy::NameVerdict::kDenied;
  Policy::NameVerdict policy_ = Policy::NameVerdict::kDenied;
};

}  // namespace warden::egress
