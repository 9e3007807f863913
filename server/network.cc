#include "server/network.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/read_file.h"
#include "spdlog/spdlog.h"

namespace warden {
namespace {

egress::PolicySpec SpecOf(const NetworkPolicyOptions& o) {
  egress::PolicySpec spec;
  spec.allow_by_default = o.allow_by_default;
  spec.allow = o.allow;
  spec.deny = o.deny;
  return spec;
}

// A secret's file: readable by its owner alone, as a tokens file must be.
absl::StatusOr<std::string> ReadSecretFile(const std::string& setting, const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(setting, ": ", path));
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(setting, ": ", path, " may be read by others than its owner: run chmod 600 ", path));
  }
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat(setting, ": ", path, " belongs to someone other than root or wardend's user"));
  }
  ASSIGN_OR_RETURN(std::string value, ReadWholeFile(path));
  // One value, without the newline an editor adds.
  return std::string(absl::StripTrailingAsciiWhitespace(value));
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& data, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("writing ", tmp));
  const bool ok = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  fchmod(fd, mode);
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(errno, absl::StrCat("writing ", path));
  }
  return absl::OkStatus();
}

void Audit(const egress::AuditRecord& r) {
  // Never a secret: the record holds none (only whether one was used).
  spdlog::info(
      "egress tenant={} session={} host={} port={} address={} decision={} mode={} bytes_out={} bytes_in={} "
      "duration_ms={}{}{}",
      r.who.tenant.empty() ? "-" : r.who.tenant, r.who.session.empty() ? "-" : r.who.session,
      r.host.empty() ? "-" : r.host, r.port, r.address.empty() ? "-" : r.address, r.allowed ? "allowed" : "refused",
      r.mode, r.bytes_out, r.bytes_in, absl::ToInt64Milliseconds(r.duration), r.secrets_used ? " secrets=1" : "",
      r.reason.empty() ? "" : absl::StrCat(" reason=\"", r.reason, "\""));
}

}  // namespace

std::string PolicyToJson(const egress::Policy& policy) {
  nlohmann::json out = {{"allow_by_default", policy.allow_by_default}};
  for (const auto& d : policy.allow) out["allow"].push_back(d.text);
  for (const auto& d : policy.deny) out["deny"].push_back(d.text);
  for (const egress::HeaderRule& r : policy.header_rules) {
    nlohmann::json headers = nlohmann::json::array();
    for (const auto& [name, value] : r.headers) headers.push_back({name, value});
    out["header_rules"].push_back({{"host", r.host}, {"headers", headers}});
  }
  for (const egress::SecretBinding& s : policy.secrets) {
    nlohmann::json hosts = nlohmann::json::array();
    for (const auto& d : s.hosts) hosts.push_back(d.text);
    out["secrets"].push_back({{"name", s.name}, {"value", s.value}, {"hosts", hosts}});
  }
  return out.dump();
}

absl::StatusOr<egress::PolicySpec> PolicySpecFromJson(const std::string& text) {
  nlohmann::json in = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!in.is_object()) return absl::DataLossError("a network policy that is not a JSON object");
  egress::PolicySpec spec;
  try {
    spec.allow_by_default = in.value("allow_by_default", false);
    for (const auto& e : in.value("allow", nlohmann::json::array())) spec.allow.push_back(e.get<std::string>());
    for (const auto& e : in.value("deny", nlohmann::json::array())) spec.deny.push_back(e.get<std::string>());
    for (const auto& r : in.value("header_rules", nlohmann::json::array())) {
      egress::HeaderRule rule{r.at("host").get<std::string>(), {}};
      for (const auto& h : r.at("headers")) rule.headers.emplace_back(h.at(0).get<std::string>(), h.at(1).get<std::string>());
      spec.header_rules.push_back(std::move(rule));
    }
    for (const auto& s : in.value("secrets", nlohmann::json::array())) {
      egress::PolicySpec::Secret secret{s.at("name").get<std::string>(), s.at("value").get<std::string>(), {}};
      for (const auto& h : s.at("hosts")) secret.hosts.push_back(h.get<std::string>());
      spec.secrets.push_back(std::move(secret));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("a malformed network policy: ", e.what()));
  }
  return spec;
}

absl::StatusOr<std::unique_ptr<Network>> Network::Create(const DaemonOptions& daemon, const std::string& state_dir,
                                                         const std::string& runtime_dir) {
  auto network = std::unique_ptr<Network>(new Network());
  network->options_ = daemon.egress;
  const EgressOptions& o = network->options_;

  // The interception CA: kept where the operator says, else beside the
  // state, so that sessions kept across a restart trust it still.
  if (!o.ca_cert_file.empty()) {
    ASSIGN_OR_RETURN(auto ca, egress::CertificateAuthority::LoadOrCreate(o.ca_cert_file, o.ca_key_file,
                                                                         "Warden egress CA"));
    network->ca_ = std::move(ca);
  } else if (!state_dir.empty()) {
    ASSIGN_OR_RETURN(auto ca, egress::CertificateAuthority::LoadOrCreate(state_dir + "/egress-ca.pem",
                                                                         state_dir + "/egress-ca.key",
                                                                         "Warden egress CA"));
    network->ca_ = std::move(ca);
  } else {
    ASSIGN_OR_RETURN(auto ca, egress::CertificateAuthority::Create("Warden egress CA"));
    network->ca_ = std::move(ca);
  }

  // The sandboxes' CA bundle: the host's public CAs (what tunnelled hosts
  // are checked against inside), the operator's extra ones, and the CA.
  std::string bundle;
  if (auto host = ReadWholeFile("/etc/ssl/certs/ca-certificates.crt"); host.ok()) bundle = *host;
  for (const std::string& file : o.sandbox_ca_files) {
    ASSIGN_OR_RETURN(std::string extra, ReadWholeFile(file));
    absl::StrAppend(&bundle, bundle.empty() || bundle.back() == '\n' ? "" : "\n", extra);
  }
  absl::StrAppend(&bundle, bundle.empty() || bundle.back() == '\n' ? "" : "\n", "# Warden egress CA\n",
                  network->ca_->certificate_pem());
  if (mkdir(runtime_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("making ", runtime_dir));
  }
  network->runtime_dir_ = runtime_dir;
  network->ca_bundle_ = runtime_dir + "/sandbox-ca-bundle.pem";
  RETURN_IF_ERROR(WriteFileAtomically(network->ca_bundle_, bundle, 0644));

  // Ceilings.
  auto ceiling = [](const EgressCeilingOptions& c, const std::string& source) -> absl::StatusOr<Ceiling> {
    ASSIGN_OR_RETURN(egress::Policy policy, egress::Policy::Build(SpecOf(c.policy), source));
    return Ceiling{std::make_shared<const egress::Policy>(std::move(policy)), source, &c};
  };
  ASSIGN_OR_RETURN(network->default_ceiling_, ceiling(o.default_ceiling, "egress.default_ceiling"));
  for (const auto& [tenant, c] : o.tenants) {
    ASSIGN_OR_RETURN(network->tenant_ceilings_[tenant], ceiling(c, absl::StrCat("egress.tenants.", tenant)));
  }

  // The operator's secrets, read once.
  for (size_t i = 0; i < o.secrets.size(); ++i) {
    const EgressSecretOptions& s = o.secrets[i];
    const std::string where = absl::StrCat("egress.secrets[", i, "]");
    ASSIGN_OR_RETURN(std::string value, ReadSecretFile(where + ".value_file", s.value_file));
    egress::PolicySpec spec;
    spec.secrets.push_back({s.name, value, s.hosts});
    ASSIGN_OR_RETURN(egress::Policy built, egress::Policy::Build(spec, where));
    network->secrets_.push_back({built.secrets[0], s.tenants});
  }

  egress::ProxyOptions proxy;
  proxy.io_threads = o.io_threads;
  for (const auto& [name, addresses] : o.hosts) {
    ASSIGN_OR_RETURN(std::string lower, egress::NormalizeHostName(name));
    for (const std::string& a : addresses) {
      if (auto parsed = egress::Address::Parse(a)) proxy.resolver.hosts[lower].push_back(*parsed);
    }
  }
  proxy.resolver.servers = o.name_servers;
  for (const std::string& entry : o.allow_internal) {
    ASSIGN_OR_RETURN(egress::Destination d, egress::ParseDestination(entry));
    proxy.allow_internal.push_back(std::move(d));
  }
  proxy.upstream_ca_file = o.upstream_ca_file;
  proxy.ca = network->ca_;
  proxy.connect_timeout = absl::Milliseconds(o.connect_timeout_ms);
  proxy.idle_timeout = absl::Milliseconds(o.idle_timeout_ms);
  proxy.max_connections_per_tenant = o.max_connections_per_tenant;
  proxy.audit = Audit;
  ASSIGN_OR_RETURN(network->proxy_, egress::Proxy::Start(std::move(proxy)));
  spdlog::info("egress proxy {}: sandboxes trust {}", o.enabled ? "on" : "off (every attempt refused, saying so)",
               network->ca_bundle_);
  return network;
}

Network::~Network() {
  // The bundle and its directory are this daemon's run's (a kept sandbox's
  // bind holds its own reference to the file); the CA stays with the state.
  if (!ca_bundle_.empty()) unlink(ca_bundle_.c_str());
  if (!runtime_dir_.empty()) rmdir(runtime_dir_.c_str());
}

const std::string& Network::ca_certificate_pem() const { return ca_->certificate_pem(); }

std::function<std::shared_ptr<EgressGate>()> Network::GateFactory() {
  return [this]() -> std::shared_ptr<EgressGate> {
    return proxy_->NewChannel({"", ""}, egress::Rules::Closed("this sandbox is not in use yet"));
  };
}

const Network::Ceiling& Network::CeilingOf(const std::string& tenant) const {
  auto it = tenant_ceilings_.find(tenant);
  return it != tenant_ceilings_.end() ? it->second : default_ceiling_;
}

absl::StatusOr<std::shared_ptr<const egress::Policy>> Network::SessionPolicy(const std::string& tenant,
                                                                            const egress::PolicySpec& spec) const {
  ASSIGN_OR_RETURN(egress::Policy policy, egress::Policy::Build(spec, "network"));
  const Ceiling& ceiling = CeilingOf(tenant);
  if ((!policy.secrets.empty() || !policy.header_rules.empty()) && !ceiling.options->session_secrets) {
    return absl::PermissionDeniedError(absl::StrCat(
        "tenant ", tenant, " may not bind secrets or header rules of its own (", ceiling.source,
        ".session_secrets is false); ask the operator to bind them in egress.secrets"));
  }
  for (const egress::SecretBinding& s : policy.secrets) {
    for (const OperatorSecret& o : secrets_) {
      if (o.binding.name == s.name) {
        return absl::InvalidArgumentError(absl::StrCat(
            "network.secrets: ", s.name, " is the name of a secret the operator binds (egress.secrets); choose another"));
      }
    }
  }
  return std::make_shared<const egress::Policy>(std::move(policy));
}

std::shared_ptr<const egress::Policy> Network::PoolPolicy(const NetworkPolicyOptions& options) {
  if (options.empty()) return nullptr;
  auto built = egress::Policy::Build(SpecOf(options), "pools[].network");
  if (!built.ok()) return nullptr;  // DaemonOptions::Validate refused it already
  return std::make_shared<const egress::Policy>(*std::move(built));
}

std::shared_ptr<const egress::Rules> Network::RulesFor(const std::string& session, const std::string& tenant,
                                                       std::shared_ptr<const egress::Policy> policy,
                                                       bool own) const {
  const std::string who = session.empty() ? "this sandbox" : absl::StrCat("session ", session);
  if (!options_.enabled) {
    return egress::Rules::Closed(absl::StrCat(
        who, " has no network: egress is off on this wardend; the operator turns it on with egress.enabled in "
             "wardend.json (and allows tenants hosts in egress.default_ceiling or egress.tenants)"));
  }
  const Ceiling& ceiling = CeilingOf(tenant);
  if (ceiling.policy->DeniesEverything()) {
    return egress::Rules::Closed(absl::StrCat(
        who, " has no network: tenant ", tenant.empty() ? "-" : tenant, "'s ceiling (", ceiling.source,
        " in wardend.json) allows no destination; the operator grants hosts there"));
  }
  if (policy == nullptr) {
    return egress::Rules::Closed(absl::StrCat(
        who, " has no network policy: create the session with one (warden.v1 CreateSessionRequest.network, "
             "UpdateNetwork; E2B network.allowOut or allowInternetAccess), or ask the operator for a pool "
             "policy (pools[].network)"));
  }
  // The operator's secrets for this tenant join the policy.
  std::shared_ptr<const egress::Policy> effective = policy;
  std::vector<egress::SecretBinding> added;
  for (const OperatorSecret& s : secrets_) {
    if (s.tenants.empty() || std::find(s.tenants.begin(), s.tenants.end(), tenant) != s.tenants.end()) {
      added.push_back(s.binding);
    }
  }
  if (!added.empty()) {
    auto merged = std::make_shared<egress::Policy>(*policy);
    for (egress::SecretBinding& b : added) merged->secrets.push_back(std::move(b));
    effective = std::move(merged);
  }
  auto rules = std::make_shared<egress::Rules>();
  rules->ceiling = ceiling.policy;
  rules->ceiling_source = ceiling.source;
  rules->policy = std::move(effective);
  rules->policy_source = own ? absl::StrCat(who, "'s network policy")
                             : absl::StrCat(who, "'s pool policy (pools[].network)");
  rules->limits.max_bytes = ceiling.options->max_bytes_per_session;
  rules->limits.max_connections = ceiling.options->max_connections_per_session;
  return rules;
}

void Network::Bind(EgressGate* gate, const std::string& session, const std::string& tenant,
                   std::shared_ptr<const egress::Policy> policy,
                   std::shared_ptr<const egress::Policy> pool_policy) const {
  auto* channel = dynamic_cast<egress::Channel*>(gate);
  if (channel == nullptr) return;
  const bool own = policy != nullptr;
  channel->SetIdentity({session, tenant});
  channel->SetRules(RulesFor(session, tenant, own ? std::move(policy) : std::move(pool_policy), own));
}

std::vector<std::string> Network::SecretEnvironment(const std::string& tenant, const egress::Policy* policy) const {
  std::vector<std::string> env;
  if (policy != nullptr) {
    for (const egress::SecretBinding& s : policy->secrets) env.push_back(s.name + "=" + egress::Placeholder(s.name));
  }
  for (const OperatorSecret& s : secrets_) {
    if (s.tenants.empty() || std::find(s.tenants.begin(), s.tenants.end(), tenant) != s.tenants.end()) {
      env.push_back(s.binding.name + "=" + egress::Placeholder(s.binding.name));
    }
  }
  return env;
}

egress::Usage Network::UsageOf(const EgressGate* gate) {
  const auto* channel = dynamic_cast<const egress::Channel*>(gate);
  return channel == nullptr ? egress::Usage() : channel->usage();
}

}  // namespace warden
