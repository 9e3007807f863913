#include "egress/rules.h"

#include "absl/strings/str_cat.h"

namespace warden::egress {
namespace {

std::string Target(const Host& host, uint16_t port) { return absl::StrCat(host.ToString(), ":", port); }

std::string Why(const Destination* rule, bool allow_by_default, bool allowed) {
  if (rule != nullptr) return absl::StrCat(allowed ? "its allow entry '" : "its deny entry '", rule->text, "'");
  return allowed ? "its default (allow_by_default)" : "no allow entry matches";
}

}  // namespace

std::shared_ptr<const Rules> Rules::Closed(std::string why) {
  auto rules = std::make_shared<Rules>();
  rules->closed = std::move(why);
  return rules;
}

Decision::Decision(const Rules& rules, const Host& host, uint16_t port) : rules_(rules), host_(host), port_(port) {}

absl::Status Decision::Admit() {
  if (!rules_.closed.empty()) return absl::PermissionDeniedError(rules_.closed);
  if (rules_.ceiling == nullptr || rules_.policy == nullptr) {
    return absl::PermissionDeniedError("this sandbox has no network policy");
  }
  if (host_.address) return absl::OkStatus();  // decided on the address
  struct Level {
    const Policy& policy;
    const std::string& source;
    Policy::NameVerdict* verdict;
  };
  for (const Level& level : {Level{*rules_.ceiling, rules_.ceiling_source, &ceiling_},
                             Level{*rules_.policy, rules_.policy_source, &policy_}}) {
    const Policy::NameDecision d = level.policy.DecideName(host_.name, port_);
    *level.verdict = d.verdict;
    if (d.verdict != Policy::NameVerdict::kDenied) continue;
    std::string how = d.rule != nullptr ? absl::StrCat("by its deny entry '", d.rule->text, "'")
                                        : "as no name entry (a name, *.domain or *) allows it";
    bool only_by_address = false;
    for (const Destination& a : level.policy.allow) {
      only_by_address |= a.kind == Destination::Kind::kNetwork;
    }
    return absl::PermissionDeniedError(absl::StrCat(
        Target(host_, port_), " is refused by ", level.source, " ", how,
        only_by_address && d.rule == nullptr
            ? "; address entries (203.0.113.0/24) decide only addresses: a name is never resolved to find "
              "out, so allow the name itself"
            : ""));
  }
  return absl::OkStatus();
}

absl::Status Decision::AdmitAddress(const Address& address) const {
  struct Level {
    const Policy& policy;
    const std::string& source;
    Policy::NameVerdict verdict;
  };
  for (const Level& level : {Level{*rules_.ceiling, rules_.ceiling_source, ceiling_},
                             Level{*rules_.policy, rules_.policy_source, policy_}}) {
    // A name allowed by name goes to whatever it resolved to (an allow
    // entry beats deny entries); otherwise each address is decided.
    if (!host_.address && level.verdict == Policy::NameVerdict::kAllowed) continue;
    const Policy::AddressDecision d = level.policy.DecideAddress(address, port_);
    if (d.allowed) continue;
    const std::string what = host_.address ? Target(host_, port_)
                                           : absl::StrCat(Target(host_, port_), " (", address.ToString(), ")");
    return absl::PermissionDeniedError(
        absl::StrCat(what, " is refused by ", level.source, ": ", Why(d.rule, level.policy.allow_by_default, false)));
  }
  return absl::OkStatus();
}

}  // namespace warden::egress
