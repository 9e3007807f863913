// Network: wardend's side of the sandboxes' way out. It runs the egress
// proxy (egress/proxy.h), keeps the interception CA and the CA bundle every
// sandbox trusts, and turns the configuration (egress.*, pools[].network)
// and what sessions ask for (CreateSessionRequest.network, UpdateNetwork)
// into the Rules each sandbox's channel enforces:
//
//   ceiling  the operator's, for the tenant (egress.tenants.T, else
//            egress.default_ceiling): nothing a session asks for goes past it;
//   policy   the session's own, or else its pool's (pools[].network), with
//            the operator's secrets for the tenant added (egress.secrets);
//   closed   egress off, or no policy at all: every attempt is answered
//            at once with why, and which setting would change it.
//
// Sessions' secrets are checked against the tenant's rights here; their
// values never reach a log, a metric, an error or the sandbox (the sandbox
// sees placeholders, egress/policy.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "egress/policy.h"
#include "egress/proxy.h"
#include "egress/rules.h"
#include "sandbox/egress_gate.h"
#include "server/options.h"

namespace warden {

// A policy as JSON, secret and header values included: for the session
// records wardend keeps across a restart (0600, in the state directory),
// never for anything shown.
std::string PolicyToJson(const egress::Policy& policy);
absl::StatusOr<egress::PolicySpec> PolicySpecFromJson(const std::string& text);

class Network {
 public:
  // Starts the proxy; makes or loads the CA (egress.ca_*_file, else
  // `state_dir`/egress-ca.*, else in memory) and writes the sandboxes' CA
  // bundle (the host's public CAs, egress.sandbox_ca_files and the CA) into
  // `runtime_dir` (made if missing). Reads the operator's secrets.
  static absl::StatusOr<std::unique_ptr<Network>> Create(const DaemonOptions& options, const std::string& state_dir,
                                                         const std::string& runtime_dir);
  ~Network();

  // A gate per sandbox (SessionOptions::egress): a channel of the proxy's
  // that refuses everything until Bind gives it an owner and rules.
  std::function<std::shared_ptr<EgressGate>()> GateFactory();
  // The host file sandboxes bind as their CA bundle.
  const std::string& ca_bundle() const { return ca_bundle_; }
  const std::string& ca_certificate_pem() const;

  // A session's own policy, checked (InvalidArgument naming the entry) and
  // against its tenant's rights (PermissionDenied for secrets the tenant
  // may not bind).
  absl::StatusOr<std::shared_ptr<const egress::Policy>> SessionPolicy(const std::string& tenant,
                                                                     const egress::PolicySpec& spec) const;
  // A pool's policy from the configuration (validated already); null for
  // an empty one.
  static std::shared_ptr<const egress::Policy> PoolPolicy(const NetworkPolicyOptions& options);

  // What `gate` (one of GateFactory's) enforces from now on: for session
  // `session` of `tenant`, under `policy` (its own, else `pool_policy`;
  // either may be null).
  void Bind(EgressGate* gate, const std::string& session, const std::string& tenant,
            std::shared_ptr<const egress::Policy> policy, std::shared_ptr<const egress::Policy> pool_policy) const;
  // The placeholders of the secrets a sandbox of `tenant` under `policy`
  // may use, as environment entries ("NAME=warden-secret-NAME").
  std::vector<std::string> SecretEnvironment(const std::string& tenant, const egress::Policy* policy) const;
  // What `gate`'s sandboxes moved so far.
  static egress::Usage UsageOf(const EgressGate* gate);
  std::map<std::string, egress::Usage> TenantUsage() const { return proxy_->TenantUsage(); }
  egress::Proxy& proxy() { return *proxy_; }
  bool enabled() const { return options_.enabled; }

 private:
  Network() = default;
  struct Ceiling {
    std::shared_ptr<const egress::Policy> policy;
    std::string source;  // "egress.tenants.T" or "egress.default_ceiling"
    const EgressCeilingOptions* options = nullptr;
  };
  const Ceiling& CeilingOf(const std::string& tenant) const;
  std::shared_ptr<const egress::Rules> RulesFor(const std::string& session, const std::string& tenant,
                                                std::shared_ptr<const egress::Policy> policy, bool own) const;

  EgressOptions options_;
  std::shared_ptr<egress::CertificateAuthority> ca_;
  std::unique_ptr<egress::Proxy> proxy_;
  std::string runtime_dir_;  // made for this run; removed with it when empty
  std::string ca_bundle_;
  Ceiling default_ceiling_;
  std::map<std::string, Ceiling> tenant_ceilings_;
  // The operator's secrets, with the tenants each is for (empty: all).
  struct OperatorSecret {
    egress::SecretBinding binding;
    std::vector<std::string> tenants;
  };
  std::vector<OperatorSecret> secrets_;
};

}  // namespace warden
