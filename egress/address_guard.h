// AddressGuard: the last check before the proxy connects anywhere. Whatever
// a policy allows, an address inside the host's own reach - loopback,
// link-local (cloud metadata at 169.254.169.254), private and shared
// ranges, the host's own addresses, multicast, reserved and documentation
// ranges, and the IPv6 forms that embed such an IPv4 address (6to4, NAT64)
// - is refused unless the operator lists its network (egress.allow_internal).
// It is checked after resolution, on the address the proxy then connects
// to, so a name that resolves somewhere internal (DNS rebinding) is
// refused the same way as the address written out.
#pragma once

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "egress/destination.h"

namespace warden::egress {

enum class AddressClass {
  kPublic,
  kLoopback,
  kLinkLocal,
  kMetadata,     // a cloud's instance metadata service
  kPrivate,      // RFC 1918, IPv6 unique local, site-local
  kShared,       // 100.64.0.0/10 (carrier-grade NAT)
  kUnspecified,  // 0.0.0.0/8, ::
  kMulticast,    // and broadcast
  kReserved,     // documentation, benchmarking, IETF and future use
  kHostOwn,      // an address of one of this host's interfaces
};
const char* AddressClassName(AddressClass c);

// The class of `address` by its range (kHostOwn is AddressGuard's to say).
AddressClass Classify(const Address& address);

class AddressGuard {
 public:
  // `allowed_internal`: networks (Destination::Kind::kNetwork, with ports)
  // the operator lets the proxy reach though they are internal.
  explicit AddressGuard(std::vector<Destination> allowed_internal = {});

  // OK, or PermissionDenied saying which class `address` (what `target`
  // resolved to) is in and which setting would allow it.
  absl::Status Check(const std::string& target, const Address& address, uint16_t port) const;

 private:
  bool IsHostOwn(const Address& address) const;
  const std::vector<Destination> allowed_;
  mutable absl::Mutex mu_;
  mutable std::vector<Address> own_ ABSL_GUARDED_BY(mu_);
  mutable absl::Time own_read_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace warden::egress
