// Policy: where one sandbox's connections may go, and what the proxy adds
// to its HTTPS requests on the way (header rules, secrets).
//
// Precedence, the same at every level (E2B's): an `allow` entry beats a
// `deny` entry, which beats the default (`allow_by_default`, false unless
// set). Levels combine by narrowing: a connection goes out only if every
// level (the operator's ceiling for the tenant, then the session's own
// policy or its pool's) lets it, so a session can narrow its tenant's
// ceiling and never widen it.
//
// Names and addresses: a name is decided before it is resolved, by the
// name entries (example.com, *.example.com) and "*". Network entries
// (203.0.113.0/24) decide addresses: an address literal, or each address a
// name resolved to when the name itself was let through only by the
// default. A name that only a network entry could allow is refused
// unresolved: resolving it would already tell its owner's name server
// what the sandbox asked for (DNS is a way out), so names are resolved
// only for policies that let names out.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "egress/destination.h"

namespace warden::egress {

// Headers the proxy sets on HTTPS requests to matching hosts (E2B's
// network rules' transforms): an existing header of the same name is
// replaced. Values count as secrets: never logged nor shown.
struct HeaderRule {
  std::string host;  // "api.example.com" or "*.example.com" (not the apex), lower case
  std::vector<std::pair<std::string, std::string>> headers;
};

// A secret bound to hosts: the sandbox sees Placeholder(name) in its
// environment (as `name`), and the proxy writes `value` in its place in the
// headers of HTTPS requests to `hosts` (and nowhere else).
struct SecretBinding {
  std::string name;   // an environment variable's name: [A-Za-z_][A-Za-z0-9_]*
  std::string value;  // never logged, never in an error, never in the sandbox
  std::vector<Destination> hosts;
};
// What the sandbox holds in place of secret `name`'s value.
std::string Placeholder(const std::string& name);

struct PolicySpec {  // as written in a request or the configuration file
  bool allow_by_default = false;
  std::vector<std::string> allow, deny;
  std::vector<HeaderRule> header_rules;
  struct Secret {
    std::string name, value;
    std::vector<std::string> hosts;
  };
  std::vector<Secret> secrets;
};

struct Policy {
  bool allow_by_default = false;
  std::vector<Destination> allow, deny;
  std::vector<HeaderRule> header_rules;
  std::vector<SecretBinding> secrets;

  // Validates `spec` (InvalidArgument naming the entry and `where`, e.g.
  // "network.allow[2]", and how to write it).
  static absl::StatusOr<Policy> Build(const PolicySpec& spec, const std::string& where);
  // The spec back, for GetSession: secret values and header values left
  // out (`redacted` in their place).
  PolicySpec Describe(const std::string& redacted = "(hidden)") const;
  // Nothing can go out: no allow entry and no default.
  bool DeniesEverything() const { return !allow_by_default && allow.empty(); }

  // Before resolution: a name and port.
  enum class NameVerdict {
    kDenied,     // refused by name: never resolved
    kAllowed,    // allowed by name, whatever it resolves to
    kByAddress,  // the default lets it through: resolve, then DecideAddress
  };
  struct NameDecision {
    NameVerdict verdict = NameVerdict::kDenied;
    const Destination* rule = nullptr;  // the entry that decided; null: the default
  };
  NameDecision DecideName(const std::string& lower_name, uint16_t port) const;
  struct AddressDecision {
    bool allowed = false;
    const Destination* rule = nullptr;
  };
  AddressDecision DecideAddress(const Address& address, uint16_t port) const;

  // The header rule for `lower_name`: an exact one, else the longest
  // matching wildcard; null if none (rules are not merged).
  const HeaderRule* HeaderRuleFor(const std::string& lower_name) const;
  // Whether the proxy must see `lower_name`'s requests (header rules or
  // secrets for it): then it terminates their TLS.
  bool Intercepts(const std::string& lower_name, uint16_t port) const;
};

}  // namespace warden::egress
