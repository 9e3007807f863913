#include "egress/address_guard.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace warden::egress {
namespace {

struct Range {
  const char* network;
  int prefix;
  AddressClass cls;
};

// Most specific first where ranges nest (metadata inside link-local).
const Range kRanges[] = {
    {"169.254.169.254", 32, AddressClass::kMetadata},
    {"100.100.100.200", 32, AddressClass::kMetadata},  // Alibaba Cloud
    {"fd00:ec2::254", 128, AddressClass::kMetadata},   // AWS over IPv6
    {"0.0.0.0", 8, AddressClass::kUnspecified},
    {"10.0.0.0", 8, AddressClass::kPrivate},
    {"100.64.0.0", 10, AddressClass::kShared},
    {"127.0.0.0", 8, AddressClass::kLoopback},
    {"169.254.0.0", 16, AddressClass::kLinkLocal},
    {"172.16.0.0", 12, AddressClass::kPrivate},
    {"192.0.0.0", 24, AddressClass::kReserved},
    {"192.0.2.0", 24, AddressClass::kReserved},
    {"192.88.99.0", 24, AddressClass::kReserved},
    {"192.168.0.0", 16, AddressClass::kPrivate},
    {"198.18.0.0", 15, AddressClass::kReserved},
    {"198.51.100.0", 24, AddressClass::kReserved},
    {"203.0.113.0", 24, AddressClass::kReserved},
    {"224.0.0.0", 4, AddressClass::kMulticast},
    {"240.0.0.0", 4, AddressClass::kReserved},  // 255.255.255.255 included
    {"::", 128, AddressClass::kUnspecified},
    {"::1", 128, AddressClass::kLoopback},
    {"::", 96, AddressClass::kReserved},        // IPv4-compatible (deprecated)
    {"100::", 64, AddressClass::kReserved},     // discard
    {"2001::", 23, AddressClass::kReserved},    // IETF protocol assignments, Teredo
    {"2001:db8::", 32, AddressClass::kReserved},
    {"fc00::", 7, AddressClass::kPrivate},
    {"fe80::", 10, AddressClass::kLinkLocal},
    {"fec0::", 10, AddressClass::kPrivate},     // site-local (deprecated)
    {"ff00::", 8, AddressClass::kMulticast},
};

struct ParsedRange {
  Address network;
  int prefix;
  AddressClass cls;
};

const std::vector<ParsedRange>& Ranges() {
  static const std::vector<ParsedRange>* ranges = [] {
    auto* out = new std::vector<ParsedRange>;
    for (const Range& r : kRanges) out->push_back({*Address::Parse(r.network), r.prefix, r.cls});
    return out;
  }();
  return *ranges;
}

// The IPv4 address an IPv6 one carries on to an IPv4 network (6to4,
// NAT64's well-known prefix), if it does.
std::optional<Address> EmbeddedV4(const Address& a) {
  if (!a.v6) return std::nullopt;
  Address v4;
  static const Address k6to4 = *Address::Parse("2002::");
  static const Address kNat64 = *Address::Parse("64:ff9b::");
  static const Address kNat64Local = *Address::Parse("64:ff9b:1::");
  if (a.InNetwork(k6to4, 16)) {
    std::memcpy(v4.bytes.data(), a.bytes.data() + 2, 4);
    return v4;
  }
  if (a.InNetwork(kNat64, 96) || a.InNetwork(kNat64Local, 48)) {
    std::memcpy(v4.bytes.data(), a.bytes.data() + 12, 4);
    return v4;
  }
  return std::nullopt;
}

}  // namespace

const char* AddressClassName(AddressClass c) {
  switch (c) {
    case AddressClass::kPublic: return "a public address";
    case AddressClass::kLoopback: return "a loopback address";
    case AddressClass::kLinkLocal: return "a link-local address";
    case AddressClass::kMetadata: return "a cloud metadata service's address";
    case AddressClass::kPrivate: return "a private address";
    case AddressClass::kShared: return "a shared (carrier-grade NAT) address";
    case AddressClass::kUnspecified: return "an unspecified address";
    case AddressClass::kMulticast: return "a multicast or broadcast address";
    case AddressClass::kReserved: return "a reserved address";
    case AddressClass::kHostOwn: return "an address of this host";
  }
  return "an address";
}

AddressClass Classify(const Address& address) {
  if (std::optional<Address> v4 = EmbeddedV4(address)) {
    const AddressClass inner = Classify(*v4);
    return inner == AddressClass::kPublic ? AddressClass::kPublic : inner;
  }
  for (const ParsedRange& r : Ranges()) {
    if (address.InNetwork(r.network, r.prefix)) return r.cls;
  }
  return AddressClass::kPublic;
}

AddressGuard::AddressGuard(std::vector<Destination> allowed_internal) : allowed_(std::move(allowed_internal)) {}

bool AddressGuard::IsHostOwn(const Address& address) const {
  absl::MutexLock lock(&mu_);
  // Interfaces change rarely; read them again at most once a second.
  if (absl::Now() - own_read_ > absl::Seconds(1)) {
    own_.clear();
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
      for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr) continue;
        Address a;
        if (i->ifa_addr->sa_family == AF_INET) {
          std::memcpy(a.bytes.data(), &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
        } else if (i->ifa_addr->sa_family == AF_INET6) {
          a.v6 = true;
          std::memcpy(a.bytes.data(), &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
        } else {
          continue;
        }
        own_.push_back(a);
      }
      freeifaddrs(list);
    }
    own_read_ = absl::Now();
  }
  return std::find(own_.begin(), own_.end(), address) != own_.end();
}

absl::Status AddressGuard::Check(const std::string& target, const Address& address, uint16_t port) const {
  AddressClass cls = Classify(address);
  // The host's own addresses (but loopback) are refused even inside a
  // listed network: an operator who lets sandboxes reach 10.0.0.0/8 does
  // not mean the host's own services there. Only an entry for that one
  // address (10.0.0.5/32) lets them through.
  const bool own = cls != AddressClass::kLoopback && IsHostOwn(address);
  if (own) cls = AddressClass::kHostOwn;
  if (cls == AddressClass::kPublic) return absl::OkStatus();
  for (const Destination& d : allowed_) {
    if (d.MatchesAddress(address, port) && (!own || d.prefix == address.bits())) return absl::OkStatus();
  }
  const bool literal = target == address.ToString() || target == absl::StrCat("[", address.ToString(), "]");
  return absl::PermissionDeniedError(absl::StrCat(
      literal ? target : absl::StrCat(target, " resolves to ", address.ToString(), ", which"), " is ",
      AddressClassName(cls), ": egress never connects there unless the operator lists ",
      own ? "that address alone" : "its network", " in egress.allow_internal"));
}

}  // namespace warden::egress
