#include "egress/policy.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace warden::egress {
namespace {

absl::StatusOr<std::vector<Destination>> ParseList(const std::vector<std::string>& entries,
                                                   const std::string& where) {
  std::vector<Destination> out;
  for (size_t i = 0; i < entries.size(); ++i) {
    auto d = ParseDestination(entries[i]);
    if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat(where, "[", i, "]: ", d.status().message()));
    out.push_back(*std::move(d));
  }
  return out;
}

bool ValidEnvName(const std::string& name) {
  if (name.empty() || name.size() > 128 || absl::ascii_isdigit(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
}

bool ValidHeaderName(const std::string& name) {
  // RFC 9110 token characters.
  static constexpr char kSpecial[] = "!#$%&'*+-.^_`|~";
  return !name.empty() && name.size() <= 256 && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || std::strchr(kSpecial, c) != nullptr;
  });
}

bool ValidHeaderValue(const std::string& value) {
  return value.size() <= 8192 && std::none_of(value.begin(), value.end(), [](char c) {
    return c == '\r' || c == '\n' || c == '\0';
  });
}

// Header names the proxy owns: a rule may not set them.
bool ReservedHeader(const std::string& lower) {
  return lower == "host" || lower == "content-length" || lower == "transfer-encoding" || lower == "connection" ||
         lower == "upgrade" || lower == "te" || lower == "trailer" || absl::StartsWith(lower, "proxy-");
}

}  // namespace

std::string Placeholder(const std::string& name) { return absl::StrCat("warden-secret-", name); }

absl::StatusOr<Policy> Policy::Build(const PolicySpec& spec, const std::string& where) {
  Policy p;
  p.allow_by_default = spec.allow_by_default;
  ASSIGN_OR_RETURN(p.allow, ParseList(spec.allow, where + ".allow"));
  ASSIGN_OR_RETURN(p.deny, ParseList(spec.deny, where + ".deny"));
  for (size_t i = 0; i < spec.header_rules.size(); ++i) {
    const HeaderRule& in = spec.header_rules[i];
    const std::string at = absl::StrCat(where, ".header_rules[", i, "]");
    auto d = ParseDestination(in.host);
    if (!d.ok() || (d->kind != Destination::Kind::kName && d->kind != Destination::Kind::kSubdomains) ||
        !d->ports.any()) {
      return absl::InvalidArgumentError(absl::StrCat(
          at, ": '", in.host, "' must be a host name (api.example.com) or a wildcard (*.example.com), without a port"));
    }
    HeaderRule rule;
    rule.host = d->kind == Destination::Kind::kSubdomains ? "*." + d->name : d->name;
    for (const auto& [name, value] : in.headers) {
      const std::string lower = absl::AsciiStrToLower(name);
      if (!ValidHeaderName(name) || ReservedHeader(lower)) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ": '", name, "' cannot be set: a header name (RFC 9110 token), not Host, Content-Length, "
            "Transfer-Encoding, Connection, Upgrade, TE, Trailer or Proxy-*"));
      }
      if (!ValidHeaderValue(value)) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ": the value of ", name, " must be at most 8 KiB, without CR, LF or NUL"));
      }
      rule.headers.emplace_back(name, value);
    }
    if (std::any_of(p.header_rules.begin(), p.header_rules.end(),
                    [&rule](const HeaderRule& r) { return r.host == rule.host; })) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": a second rule for ", rule.host, "; merge them"));
    }
    p.header_rules.push_back(std::move(rule));
  }
  for (size_t i = 0; i < spec.secrets.size(); ++i) {
    const PolicySpec::Secret& in = spec.secrets[i];
    const std::string at = absl::StrCat(where, ".secrets[", i, "]");
    if (!ValidEnvName(in.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          at, ": the name '", in.name, "' must be an environment variable's: letters, digits and '_', not first a digit"));
    }
    if (in.value.empty() || !ValidHeaderValue(in.value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, " (", in.name, "): the value must be 1 byte to 8 KiB, without CR, LF or NUL"));
    }
    if (in.hosts.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, " (", in.name, "): name the hosts it may be sent to (hosts)"));
    }
    SecretBinding secret;
    secret.name = in.name;
    secret.value = in.value;
    ASSIGN_OR_RETURN(secret.hosts, ParseList(in.hosts, at + ".hosts"));
    for (const Destination& d : secret.hosts) {
      if (d.kind == Destination::Kind::kEverything) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ".hosts: '*' would send ", in.name, " to every host; name the hosts it is meant for"));
      }
    }
    if (std::any_of(p.secrets.begin(), p.secrets.end(),
                    [&secret](const SecretBinding& s) { return s.name == secret.name; })) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": a second secret named ", in.name));
    }
    p.secrets.push_back(std::move(secret));
  }
  return p;
}

PolicySpec Policy::Describe(const std::string& redacted) const {
  PolicySpec s;
  s.allow_by_default = allow_by_default;
  for (const Destination& d : allow) s.allow.push_back(d.text);
  for (const Destination& d : deny) s.deny.push_back(d.text);
  for (const HeaderRule& r : header_rules) {
    HeaderRule shown{r.host, {}};
    for (const auto& [name, value] : r.headers) shown.headers.emplace_back(name, redacted);
    s.header_rules.push_back(std::move(shown));
  }
  for (const SecretBinding& b : secrets) {
    PolicySpec::Secret shown{b.name, redacted, {}};
    for (const Destination& d : b.hosts) shown.hosts.push_back(d.text);
    s.secrets.push_back(std::move(shown));
  }
  return s;
}

Policy::NameDecision Policy::DecideName(const std::string& lower_name, uint16_t port) const {
  for (const Destination& d : allow) {
    if (d.MatchesName(lower_name, port)) return {NameVerdict::kAllowed, &d};
  }
  for (const Destination& d : deny) {
    if (d.MatchesName(lower_name, port)) return {NameVerdict::kDenied, &d};
  }
  return {allow_by_default ? NameVerdict::kByAddress : NameVerdict::kDenied, nullptr};
}

Policy::AddressDecision Policy::DecideAddress(const Address& address, uint16_t port) const {
  for (const Destination& d : allow) {
    if (d.MatchesAddress(address, port)) return {true, &d};
  }
  for (const Destination& d : deny) {
    if (d.MatchesAddress(address, port)) return {false, &d};
  }
  return {allow_by_default, nullptr};
}

const HeaderRule* Policy::HeaderRuleFor(const std::string& lower_name) const {
  const HeaderRule* best = nullptr;
  for (const HeaderRule& r : header_rules) {
    if (r.host == lower_name) return &r;
    if (absl::StartsWith(r.host, "*.")) {
      const absl::string_view suffix = absl::string_view(r.host).substr(1);  // ".example.com"
      if (lower_name.size() > suffix.size() && absl::EndsWith(lower_name, suffix) &&
          (best == nullptr || r.host.size() > best->host.size())) {
        best = &r;
      }
    }
  }
  return best;
}

bool Policy::Intercepts(const std::string& lower_name, uint16_t port) const {
  if (HeaderRuleFor(lower_name) != nullptr) return true;
  for (const SecretBinding& s : secrets) {
    for (const Destination& d : s.hosts) {
      if (d.MatchesName(lower_name, port)) return true;
    }
  }
  return false;
}

}  // namespace warden::egress
