#include "gateway/gateway_options.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config_reader.h"
#include "common/status_macros.h"

namespace warden::gateway {

using config::ObjectReader;
using config::Problems;

absl::StatusOr<GatewayOptions> GatewayOptions::FromFile(const std::string& path) {
  ASSIGN_OR_RETURN(config::Json json, config::ReadJsonObjectFile(path, "deploy/warden-gateway.json"));
  GatewayOptions o;
  Problems problems;
  ObjectReader r(json, "", path, &problems);
  r.StringList("listen", &o.listen);
  r.Bool("allow_insecure_loopback", &o.allow_insecure_loopback);
  r.String("http_listen", &o.http_listen);
  r.String("admin_listen", &o.admin_listen);
  r.Object("http", [&o](ObjectReader& h) { fronts::ReadHttpSettings(h, &o.http); });
  r.Object("tls", [&o](ObjectReader& t) {
    t.String("cert_file", &o.tls.cert_file);
    t.String("key_file", &o.tls.key_file);
  });
  r.Object("auth", [&o](ObjectReader& a) { a.String("tokens_file", &o.tokens_file); });
  r.Object("limits", [&o](ObjectReader& l) {
    l.Int("max_code_bytes", &o.max_code_bytes);
    l.Int("max_file_bytes", &o.max_file_bytes);
  });
  r.Object("nodes", [&o](ObjectReader& n) {
    NodesOptions& nodes = o.nodes;
    n.String("dns", &nodes.dns);
    n.StringList("addresses", &nodes.addresses);
    n.Int("port", &nodes.port);
    n.Int("resolve_interval_ms", &nodes.resolve_interval_ms);
    n.Int("poll_interval_ms", &nodes.poll_interval_ms);
    n.Int("poll_timeout_ms", &nodes.poll_timeout_ms);
    n.Int("down_after", &nodes.down_after);
    n.String("cert_file", &nodes.cert_file);
    n.String("key_file", &nodes.key_file);
    n.String("ca_file", &nodes.ca_file);
    n.String("server_name", &nodes.server_name);
  });
  r.Object("placement", [&o](ObjectReader& p) {
    p.Int("choices", &o.placement.choices);
    p.Int("max_attempts", &o.placement.max_attempts);
    p.Int("handover_wait_ms", &o.placement.handover_wait_ms);
  });
  r.Object("log", [&o](ObjectReader& l) { l.String("level", &o.log_level); });
  r.Finish();
  RETURN_IF_ERROR(problems.ToStatus(path));
  return o;
}

absl::Status GatewayOptions::Validate() const {
  Problems p;
  const bool has_tls = !tls.cert_file.empty() && !tls.key_file.empty();
  if (listen.empty()) p.Add("listen is empty: give at least one HOST:PORT, e.g. [\"0.0.0.0:50051\"]");
  for (size_t i = 0; i < listen.size(); ++i) {
    auto parsed = config::ParseAddress(absl::StrCat("listen[", i, "]"), listen[i], /*allow_unix=*/true,
                                       /*allow_host_names=*/true);
    if (!parsed.ok()) {
      p.Add(std::string(parsed.status().message()));
      continue;
    }
    if (parsed->unix_socket || has_tls) continue;
    if (!parsed->loopback) {
      p.Add(absl::StrCat("TCP listener ", listen[i], " is not loopback and has no TLS: set tls.cert_file and "
                         "tls.key_file"));
    } else if (!allow_insecure_loopback) {
      p.Add(absl::StrCat("TCP listener ", listen[i], " has no TLS: set tls.cert_file/key_file, or set "
                         "allow_insecure_loopback for loopback-only testing"));
    }
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    p.Add("set tls.cert_file and tls.key_file together (the certificate chain and its private key)");
  }
  if (tokens_file.empty()) {
    p.Add("auth.tokens_file is empty: a gateway authenticates every tenant with a bearer token, as the nodes "
          "would (give it the nodes' tokens file)");
  }
  for (const std::string& address : {http_listen, admin_listen}) {
    if (address.empty()) continue;
    auto parsed = config::ParseAddress("http_listen/admin_listen", address, /*allow_unix=*/false,
                                       /*allow_host_names=*/false);
    if (!parsed.ok()) p.Add(std::string(parsed.status().message()));
  }
  fronts::CheckHttpSettings(http, p);
  config::CheckPositive(p, "limits.max_code_bytes", max_code_bytes);
  config::CheckPositive(p, "limits.max_file_bytes", max_file_bytes);

  if (nodes.dns.empty() == nodes.addresses.empty()) {
    p.Add("nodes: set either nodes.dns (a name that resolves to every node: a Kubernetes headless Service, "
          "Swarm's tasks.<service>) or nodes.addresses (a fixed list of HOST:PORT), not both");
  }
  for (size_t i = 0; i < nodes.addresses.size(); ++i) {
    auto parsed = config::ParseAddress(absl::StrCat("nodes.addresses[", i, "]"), nodes.addresses[i],
                                       /*allow_unix=*/false, /*allow_host_names=*/true);
    if (!parsed.ok()) p.Add(std::string(parsed.status().message()));
  }
  if (nodes.port < 1 || nodes.port > 65535) p.Add(absl::StrCat("nodes.port is ", nodes.port, "; it must be 1 to 65535"));
  config::CheckPositive(p, "nodes.resolve_interval_ms", nodes.resolve_interval_ms);
  config::CheckPositive(p, "nodes.poll_interval_ms", nodes.poll_interval_ms);
  config::CheckPositive(p, "nodes.poll_timeout_ms", nodes.poll_timeout_ms);
  config::CheckPositive(p, "nodes.down_after", nodes.down_after);
  if (nodes.cert_file.empty() || nodes.key_file.empty() || nodes.ca_file.empty()) {
    p.Add("nodes.cert_file, nodes.key_file and nodes.ca_file are needed: the gateway reaches nodes over mutual "
          "TLS with a client certificate only it holds (docs/fleet.md shows how to make one)");
  }
  for (const auto& [setting, file] : {std::pair<const char*, const std::string&>{"nodes.cert_file", nodes.cert_file},
                                      {"nodes.key_file", nodes.key_file},
                                      {"nodes.ca_file", nodes.ca_file},
                                      {"tls.cert_file", tls.cert_file},
                                      {"tls.key_file", tls.key_file},
                                      {"auth.tokens_file", tokens_file}}) {
    if (file.empty()) continue;
    if (std::string problem = config::CheckReadableFile(setting, file); !problem.empty()) p.Add(std::move(problem));
  }
  if (placement.choices < 1 || placement.choices > 16) {
    p.Add(absl::StrCat("placement.choices is ", placement.choices, "; it must be 1 to 16 (2 is the usual)"));
  }
  if (placement.max_attempts < 1 || placement.max_attempts > 16) {
    p.Add(absl::StrCat("placement.max_attempts is ", placement.max_attempts, "; it must be 1 to 16"));
  }
  config::CheckPositive(p, "placement.handover_wait_ms", placement.handover_wait_ms);
  if (log_level != "trace" && log_level != "debug" && log_level != "info" && log_level != "warn" &&
      log_level != "error") {
    p.Add(absl::StrCat("log.level is '", log_level, "'; it must be trace, debug, info, warn or error"));
  }
  return p.ToStatus("the gateway's configuration");
}

}  // namespace warden::gateway
