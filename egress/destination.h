// Destination: one entry of an egress rule list - where a sandbox's
// connection may (or may not) go - and the matching of a connection's
// target against it.
//
// Written as an operator or a client writes them:
//   example.com          that name (any port)
//   *.example.com        every name below it, at any depth; not example.com itself
//   *                    every destination: names and addresses
//   203.0.113.7          that address; 203.0.113.0/24 the network
//   2001:db8::1, [2001:db8::1], 2001:db8::/32, [2001:db8::]/32
// each with an optional port or range after a colon ("example.com:443",
// "*:80", "10.0.0.0/8:8000-8999", "[2001:db8::1]:443"). Names are matched
// case-insensitively, without a trailing dot. An IPv4 address written as an
// IPv4-mapped IPv6 one (::ffff:a.b.c.d) is the IPv4 address.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden::egress {

// An IPv4 or IPv6 address, IPv4 kept as such (never mapped).
struct Address {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // IPv4 in the first 4

  static std::optional<Address> Parse(absl::string_view text);  // no brackets, no port
  static Address V4(uint32_t host_order);
  std::string ToString() const;
  int bits() const { return v6 ? 128 : 32; }
  // The first `prefix` bits equal those of `other` (same family only).
  bool InNetwork(const Address& network, int prefix) const;
  bool operator==(const Address& other) const { return v6 == other.v6 && bytes == other.bytes; }
};

struct PortRange {
  uint16_t low = 1;
  uint16_t high = 65535;
  bool Contains(uint16_t port) const { return port >= low && port <= high; }
  bool any() const { return low == 1 && high == 65535; }
};

struct Destination {
  enum class Kind {
    kEverything,  // "*"
    kName,        // exactly `name`
    kSubdomains,  // names ending in "." + `name`
    kNetwork,     // addresses in `network`/`prefix`
  };
  Kind kind = Kind::kEverything;
  std::string name;  // lower case, no trailing dot
  Address network;
  int prefix = 0;
  PortRange ports;
  std::string text;  // as written, for messages

  // A name (not an address literal) this entry can match.
  bool MatchesName(absl::string_view lower_name, uint16_t port) const;
  // An address this entry can match ("*" and networks only).
  bool MatchesAddress(const Address& address, uint16_t port) const;
};

// InvalidArgument saying what is wrong and how an entry is written.
absl::StatusOr<Destination> ParseDestination(absl::string_view text);

// A host name as a connection names it: lower case, one trailing dot
// dropped; InvalidArgument unless it is a DNS name (labels of letters,
// digits, '-' and '_', 1-63 bytes each, 253 in all).
absl::StatusOr<std::string> NormalizeHostName(absl::string_view name);

// A target host as a client writes it (CONNECT's authority, a URL's host):
// an address literal (IPv6 in brackets or not) or a name.
struct Host {
  std::optional<Address> address;
  std::string name;  // when not an address: normalised
  std::string ToString() const;  // "[2001:db8::1]" for IPv6
};
absl::StatusOr<Host> ParseHost(absl::string_view text);

// "host:port" (IPv6 in brackets) as CONNECT's request target gives it.
absl::StatusOr<std::pair<Host, uint16_t>> ParseAuthority(absl::string_view text, uint16_t default_port = 0);

}  // namespace warden::egress
