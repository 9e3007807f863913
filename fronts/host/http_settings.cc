#include "fronts/host/http_settings.h"

#include <tuple>

#include "absl/strings/str_cat.h"
#include "fronts/http/access_policy.h"

namespace warden::fronts {

void ReadHttpSettings(config::ObjectReader& r, HttpSettings* out) {
  r.StringList("allowed_hosts", &out->allowed_hosts);
  r.StringList("allowed_origins", &out->allowed_origins);
  r.Int("head_timeout_ms", &out->head_timeout_ms);
  r.Int("idle_timeout_ms", &out->idle_timeout_ms);
  r.Int("max_connections", &out->max_connections);
  r.Int("max_streams_per_tenant", &out->max_streams_per_tenant);
  r.Int("io_threads", &out->io_threads);
  r.Int("handler_threads", &out->handler_threads);
  r.Int("max_body_memory_mb", &out->max_body_memory_mb);
  r.String("e2b_key_file", &out->e2b_key_file);
  r.Int("e2b_signed_url_max_seconds", &out->e2b_signed_url_max_seconds);
  r.String("sandbox_domain", &out->sandbox_domain);
  r.Bool("allow_public_ports", &out->allow_public_ports);
}

void CheckHttpSettings(const HttpSettings& settings, config::Problems& problems) {
  const std::tuple<const char*, int64_t, int64_t, int64_t> bounds[] = {
      {"http.head_timeout_ms", settings.head_timeout_ms, 100, 3'600'000},
      {"http.idle_timeout_ms", settings.idle_timeout_ms, 100, 86'400'000},
      {"http.max_connections", settings.max_connections, 1, 1'000'000},
      {"http.max_streams_per_tenant", settings.max_streams_per_tenant, 1, 1'000'000},
      {"http.io_threads", settings.io_threads, 0, 64},
      {"http.handler_threads", settings.handler_threads, 1, 16'384},
      {"http.max_body_memory_mb", settings.max_body_memory_mb, 16, 1 << 20},
      {"http.e2b_signed_url_max_seconds", settings.e2b_signed_url_max_seconds, 1, 366LL * 86'400}};
  for (const auto& [name, value, min, max] : bounds) {
    if (value < min || value > max) {
      problems.Add(absl::StrCat(name, " is ", value, "; it must be between ", min, " and ", max));
    }
  }
  for (const std::string& host : settings.allowed_hosts) {
    if (absl::Status s = http::NormalizeAllowedHost(host).status(); !s.ok()) {
      problems.Add(absl::StrCat("http.allowed_hosts: ", s.message()));
    }
  }
  if (!settings.sandbox_domain.empty()) {
    if (absl::Status s = http::NormalizeAllowedHost(settings.sandbox_domain).status();
        !s.ok() || settings.sandbox_domain.find(':') != std::string::npos ||
        settings.sandbox_domain.find('.') == std::string::npos) {
      problems.Add(absl::StrCat("http.sandbox_domain is '", settings.sandbox_domain,
                                "': give a domain without a port, e.g. sandbox.example.com (wildcard DNS for "
                                "*.sandbox.example.com pointing at this front)"));
    }
  }
  for (const std::string& origin : settings.allowed_origins) {
    if (absl::Status s = http::NormalizeOrigin(origin).status(); !s.ok()) {
      problems.Add(absl::StrCat("http.allowed_origins: ", s.message()));
    }
  }
}

}  // namespace warden::fronts
