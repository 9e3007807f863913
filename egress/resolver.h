// Resolver: names to addresses for the egress proxy, on the host, never in
// the sandbox (which has no resolver at all). The operator's own map
// (egress.hosts) answers first and alone for the names it holds; other
// names go to the host's DNS through c-ares (its /etc/resolv.conf and
// /etc/hosts), asynchronously on one thread of the resolver's own, each
// lookup bounded by a timeout. The proxy asks only for names a policy lets
// out (rules.h): an unresolved name tells no name server anything.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "egress/destination.h"

namespace warden::egress {

class Resolver {
 public:
  struct Options {
    // Names (lower case) answered from here, never from DNS.
    std::map<std::string, std::vector<Address>> hosts;
    absl::Duration timeout = absl::Seconds(5);  // one lookup, retries included
    // "IP" or "IP:PORT" name servers; empty: /etc/resolv.conf's.
    std::vector<std::string> servers;
  };
  using Done = std::function<void(absl::StatusOr<std::vector<Address>>)>;

  static absl::StatusOr<std::unique_ptr<Resolver>> Start(Options options);
  ~Resolver();  // lookups still pending get Unavailable

  // Resolves `lower_name` (normalised) to its IPv4 and IPv6 addresses.
  // `done` runs once, on the resolver's thread or (for the map, and after
  // the resolver stopped) on the caller's; it must not block.
  void Resolve(const std::string& lower_name, Done done);

 private:
  class Impl;
  explicit Resolver(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace warden::egress
