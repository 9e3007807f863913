#include "egress/destination.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace warden::egress {
namespace {

constexpr char kForms[] =
    "write a name (example.com), a wildcard (*.example.com), * for everything, an address "
    "(203.0.113.7, [2001:db8::1]) or a network (203.0.113.0/24, [2001:db8::]/32), each with an "
    "optional :PORT or :LOW-HIGH";

absl::StatusOr<PortRange> ParsePorts(absl::string_view text, absl::string_view entry) {
  PortRange range;
  std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(text, absl::MaxSplits('-', 1));
  uint32_t low = 0, high = 0;
  const bool ok_low = absl::SimpleAtoi(parts.first, &low);
  const bool ok_high = parts.second.empty() && text.find('-') == absl::string_view::npos
                           ? (high = low, ok_low)
                           : absl::SimpleAtoi(parts.second, &high);
  if (!ok_low || !ok_high || low < 1 || high > 65535 || low > high) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", entry, "': the port must be 1-65535, or a range LOW-HIGH within it"));
  }
  range.low = static_cast<uint16_t>(low);
  range.high = static_cast<uint16_t>(high);
  return range;
}

bool IsLabelChar(char c) { return absl::ascii_isalnum(c) || c == '-' || c == '_'; }

}  // namespace

std::optional<Address> Address::Parse(absl::string_view text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  const std::string s(text);
  Address a;
  in_addr v4;
  if (s.find(':') == std::string::npos) {
    // inet_pton refuses the shorthand forms inet_aton takes (010.1, 1.2.3).
    if (inet_pton(AF_INET, s.c_str(), &v4) != 1) return std::nullopt;
    std::memcpy(a.bytes.data(), &v4, 4);
    return a;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, s.c_str(), &v6) != 1) return std::nullopt;
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(v6.s6_addr, kMapped, 12) == 0) {
    std::memcpy(a.bytes.data(), v6.s6_addr + 12, 4);
    return a;
  }
  a.v6 = true;
  std::memcpy(a.bytes.data(), v6.s6_addr, 16);
  return a;
}

Address Address::V4(uint32_t host_order) {
  Address a;
  a.bytes[0] = static_cast<uint8_t>(host_order >> 24);
  a.bytes[1] = static_cast<uint8_t>(host_order >> 16);
  a.bytes[2] = static_cast<uint8_t>(host_order >> 8);
  a.bytes[3] = static_cast<uint8_t>(host_order);
  return a;
}

std::string Address::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof(buf));
  return buf;
}

bool Address::InNetwork(const Address& network, int prefix) const {
  if (v6 != network.v6) return false;
  const int full = prefix / 8;
  if (!std::equal(bytes.begin(), bytes.begin() + full, network.bytes.begin())) return false;
  const int rest = prefix % 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (bytes[full] & mask) == (network.bytes[full] & mask);
}

bool Destination::MatchesName(absl::string_view lower_name, uint16_t port) const {
  if (!ports.Contains(port)) return false;
  switch (kind) {
    case Kind::kEverything: return true;
    case Kind::kName: return lower_name == name;
    case Kind::kSubdomains:
      return lower_name.size() > name.size() + 1 && absl::EndsWith(lower_name, name) &&
             lower_name[lower_name.size() - name.size() - 1] == '.';
    case Kind::kNetwork: return false;
  }
  return false;
}

bool Destination::MatchesAddress(const Address& address, uint16_t port) const {
  if (!ports.Contains(port)) return false;
  if (kind == Kind::kEverything) return true;
  return kind == Kind::kNetwork && address.InNetwork(network, prefix);
}

absl::StatusOr<std::string> NormalizeHostName(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  if (absl::EndsWith(lower, ".")) lower.pop_back();
  if (lower.empty() || lower.size() > 253) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a host name"));
  }
  for (absl::string_view label : absl::StrSplit(lower, '.')) {
    if (label.empty() || label.size() > 63 || !std::all_of(label.begin(), label.end(), IsLabelChar)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", name, "' is not a host name: labels of letters, digits, '-' and '_', separated by dots"));
    }
  }
  return lower;
}

absl::StatusOr<Destination> ParseDestination(absl::string_view text) {
  Destination d;
  d.text = std::string(text);
  absl::string_view host = absl::StripAsciiWhitespace(text);
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat("an empty destination: ", kForms));
  // The port: after the last ':' unless the rest is a bare IPv6 address or
  // network (two colons or more, no brackets: no port possible).
  const bool bare_v6 = host[0] != '[' && std::count(host.begin(), host.end(), ':') > 1;
  if (!bare_v6) {
    const size_t colon = host.rfind(':');
    if (colon != absl::string_view::npos && (host[0] != '[' || colon > host.rfind(']'))) {
      auto ports = ParsePorts(host.substr(colon + 1), text);
      if (!ports.ok()) return ports.status();
      d.ports = *ports;
      host = host.substr(0, colon);
    }
  }
  if (host == "*") return d;
  // A network or an address.
  absl::string_view addr = host;
  int prefix = -1;
  if (const size_t slash = host.find('/'); slash != absl::string_view::npos) {
    if (!absl::SimpleAtoi(host.substr(slash + 1), &prefix)) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': the prefix length after '/' must be a number"));
    }
    addr = host.substr(0, slash);
  }
  if (absl::ConsumePrefix(&addr, "[")) {
    if (!absl::ConsumeSuffix(&addr, "]")) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': a '[' without its ']'; ", kForms));
    }
  }
  if (std::optional<Address> a = Address::Parse(addr)) {
    if (prefix == -1) prefix = a->bits();
    if (prefix < 0 || prefix > a->bits()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "': the prefix length must be 0-", a->bits()));
    }
    d.kind = Destination::Kind::kNetwork;
    d.network = *a;
    d.prefix = prefix;
    return d;
  }
  if (prefix != -1 || addr.size() != host.size()) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not an address or network; ", kForms));
  }
  absl::string_view name = host;
  if (absl::ConsumePrefix(&name, "*.")) d.kind = Destination::Kind::kSubdomains;
  else d.kind = Destination::Kind::kName;
  if (name.find('*') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "': a wildcard stands only first, as '*.', or alone as '*'; ", kForms));
  }
  auto normalized = NormalizeHostName(name);
  if (!normalized.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(normalized.status().message(), "; ", kForms));
  }
  d.name = *std::move(normalized);
  return d;
}

std::string Host::ToString() const {
  if (!address) return name;
  return address->v6 ? absl::StrCat("[", address->ToString(), "]") : address->ToString();
}

absl::StatusOr<Host> ParseHost(absl::string_view text) {
  Host h;
  absl::string_view s = text;
  const bool bracketed = absl::ConsumePrefix(&s, "[");
  if (bracketed && !absl::ConsumeSuffix(&s, "]")) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "': a '[' without its ']'"));
  }
  if (std::optional<Address> a = Address::Parse(s)) {
    h.address = *a;
    return h;
  }
  if (bracketed) return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not an IPv6 address"));
  auto name = NormalizeHostName(s);
  if (!name.ok()) return name.status();
  // Purely numeric names (1.2.3, 0x7f.1) are address forms some resolvers
  // accept; they are never names.
  if (std::all_of(name->begin(), name->end(), [](char c) { return absl::ascii_isdigit(c) || c == '.'; }) ||
      absl::StartsWith(*name, "0x")) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is neither an address nor a host name"));
  }
  h.name = *std::move(name);
  return h;
}

absl::StatusOr<std::pair<Host, uint16_t>> ParseAuthority(absl::string_view text, uint16_t default_port) {
  absl::string_view host = text;
  uint16_t port = default_port;
  const size_t colon = text.rfind(':');
  const size_t bracket = text.rfind(']');
  const bool has_port = colon != absl::string_view::npos &&
                        (bracket != absl::string_view::npos ? colon > bracket
                                                            : text.find(':') == colon);
  if (has_port) {
    uint32_t p = 0;
    if (!absl::SimpleAtoi(text.substr(colon + 1), &p) || p < 1 || p > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': the port must be 1-65535"));
    }
    port = static_cast<uint16_t>(p);
    host = text.substr(0, colon);
  }
  if (port == 0) return absl::InvalidArgumentError(absl::StrCat("'", text, "' needs a port (HOST:PORT)"));
  auto h = ParseHost(host);
  if (!h.ok()) return h.status();
  return std::make_pair(*std::move(h), port);
}

}  // namespace warden::egress
