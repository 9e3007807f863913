// DaemonOptions::FromFile reads wardend's JSON configuration over the built-in
// defaults, strictly: an unknown key, a wrong type or an out-of-range integer
// is an error naming the key's path, never a silent default. Validate checks
// the values against each other and the host (TLS files exist, TCP listeners
// are protected). Both report every problem at once, each saying what to do.
#include "server/options.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/config_reader.h"
#include "common/status_macros.h"
#include "egress/destination.h"
#include "egress/policy.h"
#include "kernel/language.h"
#include "nlohmann/json.hpp"

namespace warden {
namespace {

using Json = nlohmann::json;
using config::CheckPositive;
using config::CheckReadableFile;
using config::ListenAddress;
using config::ObjectReader;
using config::ParseAddress;
using config::Problems;


void ReadNetworkPolicy(ObjectReader& r, NetworkPolicyOptions* out) {
  r.Bool("allow_by_default", &out->allow_by_default);
  r.StringList("allow", &out->allow);
  r.StringList("deny", &out->deny);
}

void ReadCeiling(ObjectReader& r, EgressCeilingOptions* out) {
  ReadNetworkPolicy(r, &out->policy);
  r.Bool("session_secrets", &out->session_secrets);
  r.Int("max_bytes_per_session", &out->max_bytes_per_session);
  r.Int("max_connections_per_session", &out->max_connections_per_session);
}

void ReadEgress(ObjectReader& e, EgressOptions* o) {
  e.Bool("enabled", &o->enabled);
  e.NamedStringLists("hosts", &o->hosts);
  e.StringList("name_servers", &o->name_servers);
  e.StringList("allow_internal", &o->allow_internal);
  e.String("upstream_ca_file", &o->upstream_ca_file);
  e.StringList("sandbox_ca_files", &o->sandbox_ca_files);
  e.String("ca_cert_file", &o->ca_cert_file);
  e.String("ca_key_file", &o->ca_key_file);
  e.Object("default_ceiling", [o](ObjectReader& c) { ReadCeiling(c, &o->default_ceiling); });
  e.NamedObjects("tenants", [o](const std::string& tenant, ObjectReader& c) { ReadCeiling(c, &o->tenants[tenant]); });
  e.ObjectList(
      "secrets", [o](size_t n) { o->secrets.assign(n, EgressSecretOptions{}); },
      [o](size_t i, ObjectReader& s) {
        EgressSecretOptions& secret = o->secrets[i];
        s.String("name", &secret.name);
        s.String("value_file", &secret.value_file);
        s.StringList("hosts", &secret.hosts);
        s.StringList("tenants", &secret.tenants);
      });
  e.Int("max_connections_per_tenant", &o->max_connections_per_tenant);
  e.Int("connect_timeout_ms", &o->connect_timeout_ms);
  e.Int("idle_timeout_ms", &o->idle_timeout_ms);
  e.Int("io_threads", &o->io_threads);
}

void ReadCellLimits(ObjectReader& r, CellLimitsOptions* out) {
  r.Int("wall_ms", &out->wall_ms);
  r.Int("cpu_ms", &out->cpu_ms);
  r.Int("memory_mb", &out->memory_mb);
  r.Int("output_bytes", &out->output_bytes);
}

// The whole schema, in the order docs/operations.md documents it.
void ReadDaemonOptions(ObjectReader& r, DaemonOptions* o) {
  r.StringList("listen", &o->listen);
  r.Bool("allow_insecure_loopback", &o->allow_insecure_loopback);
  r.String("admin_listen", &o->admin_listen);
  r.String("http_listen", &o->http_listen);
  r.Object("http", [o](ObjectReader& h) { fronts::ReadHttpSettings(h, &o->http); });
  r.Object("tls", [o](ObjectReader& t) {
    t.String("cert_file", &o->tls.cert_file);
    t.String("key_file", &o->tls.key_file);
    t.String("client_ca_file", &o->tls.client_ca_file);
  });
  r.Object("auth", [o](ObjectReader& a) { a.String("tokens_file", &o->auth.tokens_file); });
  r.Object("limits", [o](ObjectReader& l) {
    l.Object("defaults", [o](ObjectReader& d) { ReadCellLimits(d, &o->limits.defaults); });
    l.Object("max", [o](ObjectReader& m) { ReadCellLimits(m, &o->limits.max); });
    l.Int("max_code_bytes", &o->limits.max_code_bytes);
    l.Int("max_file_bytes", &o->limits.max_file_bytes);
    l.Int("pids", &o->limits.pids);
    l.Int("tmpfs_mb", &o->limits.tmpfs_mb);
  });
  r.Object("sessions", [o](ObjectReader& s) {
    s.Int("max_total", &o->sessions.max_total);
    s.Int("max_per_tenant", &o->sessions.max_per_tenant);
    s.Int("default_ttl_seconds", &o->sessions.default_ttl_seconds);
    s.Int("max_ttl_seconds", &o->sessions.max_ttl_seconds);
    s.Int("default_idle_timeout_seconds", &o->sessions.default_idle_timeout_seconds);
    s.Int("hibernate_after_seconds", &o->sessions.hibernate_after_seconds);
    s.Int("max_live", &o->sessions.max_live);
  });
  r.Object("snapshots", [o](ObjectReader& s) {
    s.String("dir", &o->snapshots.dir);
    s.Int("max_bytes_per_tenant", &o->snapshots.max_bytes_per_tenant);
  });
  // A "pools" array replaces the default pools entirely; [] means none.
  r.ObjectList(
      "pools", [o](size_t n) { o->pools.assign(n, PoolOptions{}); },
      [o](size_t i, ObjectReader& p) {
        PoolOptions& pool = o->pools[i];
        // An entry without a language would silently be a python pool.
        if (!p.Has("language")) pool.language.clear();
        p.String("language", &pool.language);
        p.Int("size", &pool.size);
        p.Int("max_size", &pool.max_size);
        p.StringList("warm", &pool.warm);
        p.Int("memory_mb", &pool.memory_mb);
        p.String("wheelhouse", &pool.wheelhouse);
        p.Object("network", [&pool](ObjectReader& n) { ReadNetworkPolicy(n, &pool.network); });
        p.String("template", &pool.template_name);
      });
  r.Object("templates", [o](ObjectReader& t) {
    t.String("dir", &o->templates.dir);
    t.StringList("operators", &o->templates.operators);
    t.StringList("tenants", &o->templates.tenants);
    t.Int("max_bytes_per_tenant", &o->templates.max_bytes_per_tenant);
    t.Int("max_per_tenant", &o->templates.max_per_tenant);
    t.Int("max_archive_bytes", &o->templates.max_archive_bytes);
    t.Int("max_image_bytes", &o->templates.max_image_bytes);
    t.Bool("build", &o->templates.build);
    t.Int("build_timeout_ms", &o->templates.build_timeout_ms);
    t.Int("build_memory_mb", &o->templates.build_memory_mb);
    t.Int("build_pids", &o->templates.build_pids);
    t.Int("build_host_id_base", &o->templates.build_host_id_base);
  });
  r.Object("volumes", [o](ObjectReader& v) {
    v.String("dir", &o->volumes.dir);
    v.Int("default_bytes", &o->volumes.default_bytes);
    v.Int("max_bytes", &o->volumes.max_bytes);
    v.Int("default_files", &o->volumes.default_files);
    v.Int("max_files", &o->volumes.max_files);
    v.Int("max_bytes_per_tenant", &o->volumes.max_bytes_per_tenant);
    v.Int("max_per_tenant", &o->volumes.max_per_tenant);
    v.Int("max_mounts", &o->volumes.max_mounts);
  });
  r.Object("queue", [o](ObjectReader& q) {
    q.Int("max_depth", &o->queue.max_depth);
    q.Int("max_wait_ms", &o->queue.max_wait_ms);
    q.Int("max_waiting_per_tenant", &o->queue.max_waiting_per_tenant);
    q.Int("max_running", &o->queue.max_running);
  });
  r.Int("max_concurrent_per_tenant", &o->max_concurrent_per_tenant);
  r.Int("shutdown_grace_ms", &o->shutdown_grace_ms);
  r.Bool("keep_sessions", &o->keep_sessions);
  r.Object("log", [o](ObjectReader& l) {
    l.String("format", &o->log.format);
    l.String("level", &o->log.level);
  });
  r.Object("executor", [o](ObjectReader& e) {
    e.Bool("allow_degraded", &o->executor.allow_degraded);
    static_assert(sizeof(o->executor.host_id_base) == sizeof(uint32_t));
    e.Uint32("host_id_base", &o->executor.host_id_base);
    e.Uint32("host_id_count", &o->executor.host_id_count);
  });
  r.String("kernels_dir", &o->kernels_dir);
  r.Object("zygote", [o](ObjectReader& z) {
    z.Bool("enabled", &o->zygote.enabled);
    z.String("program", &o->zygote.program);
  });
  r.Object("agent", [o](ObjectReader& a) {
    a.Object("llm", [o](ObjectReader& l) {
      LlmOptions& llm = o->agent.llm;
      l.String("base_url", &llm.base_url);
      l.String("model", &llm.model);
      l.String("api_key_env", &llm.api_key_env);
      l.String("api_key_file", &llm.api_key_file);
      l.Int("request_timeout_ms", &llm.request_timeout_ms);
      l.Int("max_tokens", &llm.max_tokens);
      l.Double("temperature", &llm.temperature);
      l.Bool("stream", &llm.stream);
      l.Int("max_retries", &llm.max_retries);
      l.String("tools", &llm.tools);
      l.String("tool_choice", &llm.tool_choice);
    });
    a.Int("default_max_iterations", &o->agent.default_max_iterations);
    a.Int("max_iterations", &o->agent.max_iterations);
    a.Int("default_max_wall_ms", &o->agent.default_max_wall_ms);
    a.Int("max_wall_ms", &o->agent.max_wall_ms);
    a.Int("default_max_tokens", &o->agent.default_max_tokens);
    a.Int("max_tokens", &o->agent.max_tokens);
    a.Int("max_observation_bytes", &o->agent.max_observation_bytes);
  });
  r.String("state_dir", &o->state_dir);
  r.String("socket_group", &o->socket_group);
  r.Object("fleet", [o](ObjectReader& f) {
    f.String("node_id", &o->fleet.node_id);
    f.String("shared_dir", &o->fleet.shared_dir);
    f.String("gateway_ca_file", &o->fleet.gateway_ca_file);
    f.String("gateway_name", &o->fleet.gateway_name);
    f.Int("drain_wait_ms", &o->fleet.drain_wait_ms);
  });
  r.Object("egress", [o](ObjectReader& e) { ReadEgress(e, &o->egress); });
}
// An empty string when `path` is a wheelhouse sandboxes can read, else the
// problem. As root, sandboxes run as unprivileged host ids: the directory
// and its wheels must be readable by others.
std::string CheckWheelhouse(const std::string& setting, const std::string& path) {
  struct stat st;
  if (path.front() != '/') {
    return absl::StrCat(setting, " is '", path, "': use an absolute path");
  }
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::StrCat(setting, " is '", path,
                        "', which is not a directory: point it at a directory of .whl files");
  }
  const bool as_root = ::geteuid() == 0;
  if (as_root ? (st.st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH)
              : ::access(path.c_str(), R_OK | X_OK) != 0) {
    return absl::StrCat(setting, " is '", path,
                        "', which sandboxes cannot read: chmod o+rx it (and o+r its wheels)");
  }
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return absl::StrCat(setting, " is '", path, "': ", std::strerror(errno));
  std::string unreadable;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (!absl::EndsWith(name, ".whl")) continue;
    const std::string file = absl::StrCat(path, "/", name);
    struct stat wheel;
    if (::lstat(file.c_str(), &wheel) != 0 || !S_ISREG(wheel.st_mode) ||
        (as_root ? (wheel.st_mode & S_IROTH) == 0 : ::access(file.c_str(), R_OK) != 0)) {
      unreadable = name;
      break;
    }
  }
  ::closedir(dir);
  if (!unreadable.empty()) {
    return absl::StrCat(setting, " has ", unreadable,
                        ", which sandboxes cannot read: wheels must be regular files (not "
                        "symlinks) that others may read (chmod o+r)");
  }
  return "";
}

bool IsModuleName(absl::string_view name) {
  // Dotted Python identifiers (ASCII): "numpy", "matplotlib.pyplot".
  if (name.empty() || name.size() > 200) return false;
  bool start = true;
  for (char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '.') {
      if (start) return false;
      start = true;
      continue;
    }
    if (!(absl::ascii_isalpha(u) || c == '_' || (!start && absl::ascii_isdigit(u)))) return false;
    start = false;
  }
  return !start;
}

void ValidateCellLimits(Problems& p, const CellLimitsOptions& defaults,
                        const CellLimitsOptions& max) {
  struct Field {
    const char* name;
    int64_t CellLimitsOptions::*member;
  };
  for (const Field& f :
       {Field{"wall_ms", &CellLimitsOptions::wall_ms}, Field{"cpu_ms", &CellLimitsOptions::cpu_ms},
        Field{"memory_mb", &CellLimitsOptions::memory_mb},
        Field{"output_bytes", &CellLimitsOptions::output_bytes}}) {
    const int64_t d = defaults.*f.member, m = max.*f.member;
    CheckPositive(p, absl::StrCat("limits.defaults.", f.name), d);
    CheckPositive(p, absl::StrCat("limits.max.", f.name), m);
    if (d > 0 && m > 0 && d > m) {
      p.Add(absl::StrCat("limits.defaults.", f.name, " (", d, ") is above limits.max.", f.name,
                         " (", m, "): lower the default or raise the maximum"));
    }
  }
  // The sandbox cannot start anything in less (see sandbox/limits.cc).
  if (defaults.memory_mb > 0 && defaults.memory_mb < 8) {
    p.Add(absl::StrCat("limits.defaults.memory_mb is ", defaults.memory_mb,
                       "; a sandbox needs at least 8"));
  }
}

}  // namespace

absl::StatusOr<DaemonOptions> DaemonOptions::FromFile(const std::string& path) {
  ASSIGN_OR_RETURN(Json json, config::ReadJsonObjectFile(path, "deploy/wardend.json"));
  DaemonOptions options;
  Problems problems;
  ObjectReader reader(json, "", path, &problems);
  ReadDaemonOptions(reader, &options);
  reader.Finish();
  if (absl::Status s = problems.ToStatus(path); !s.ok()) return s;
  return options;
}

static void ValidatePolicy(Problems& p, const std::string& where, const NetworkPolicyOptions& policy) {
  egress::PolicySpec spec;
  spec.allow_by_default = policy.allow_by_default;
  spec.allow = policy.allow;
  spec.deny = policy.deny;
  if (auto built = egress::Policy::Build(spec, where); !built.ok()) p.Add(std::string(built.status().message()));
}

static void ValidateCeiling(Problems& p, const std::string& where, const EgressCeilingOptions& c) {
  ValidatePolicy(p, where, c.policy);
  if (c.max_bytes_per_session < 0) {
    p.Add(absl::StrCat(where, ".max_bytes_per_session is ", c.max_bytes_per_session, "; it must be 0 (no bound) or more"));
  }
  if (c.max_connections_per_session < 1 || c.max_connections_per_session > 100'000) {
    p.Add(absl::StrCat(where, ".max_connections_per_session is ", c.max_connections_per_session,
                       "; it must be 1 to 100000"));
  }
}

static void ValidateEgress(Problems& p, const EgressOptions& e) {
  for (const auto& [name, addresses] : e.hosts) {
    if (!egress::NormalizeHostName(name).ok() || egress::Address::Parse(name)) {
      p.Add(absl::StrCat("egress.hosts has '", name, "', which is not a host name"));
    }
    if (addresses.empty()) p.Add(absl::StrCat("egress.hosts.", name, " is empty: give its addresses"));
    for (const std::string& a : addresses) {
      if (!egress::Address::Parse(a)) {
        p.Add(absl::StrCat("egress.hosts.", name, " has '", a, "', which is not an IPv4 or IPv6 address"));
      }
    }
  }
  for (size_t i = 0; i < e.allow_internal.size(); ++i) {
    auto d = egress::ParseDestination(e.allow_internal[i]);
    if (!d.ok() || d->kind != egress::Destination::Kind::kNetwork) {
      p.Add(absl::StrCat("egress.allow_internal[", i, "] is '", e.allow_internal[i],
                         "': give a network (10.0.0.0/8) or an address, optionally with :PORT"));
    }
  }
  for (const auto& [setting, file] : {std::pair<const char*, const std::string&>{"egress.upstream_ca_file", e.upstream_ca_file},
                                      {"egress.ca_cert_file", e.ca_cert_file}, {"egress.ca_key_file", e.ca_key_file}}) {
    if (file.empty()) continue;
    if (file.front() != '/') p.Add(absl::StrCat(setting, " is '", file, "': use an absolute path"));
  }
  if (!e.upstream_ca_file.empty()) {
    if (std::string problem = CheckReadableFile("egress.upstream_ca_file", e.upstream_ca_file); !problem.empty()) {
      p.Add(std::move(problem));
    }
  }
  for (size_t i = 0; i < e.sandbox_ca_files.size(); ++i) {
    if (std::string problem = CheckReadableFile(absl::StrCat("egress.sandbox_ca_files[", i, "]").c_str(),
                                                e.sandbox_ca_files[i]);
        !problem.empty()) {
      p.Add(std::move(problem));
    }
  }
  if (e.ca_cert_file.empty() != e.ca_key_file.empty()) {
    p.Add("set egress.ca_cert_file and egress.ca_key_file together (or neither, for a CA kept in the state directory)");
  }
  ValidateCeiling(p, "egress.default_ceiling", e.default_ceiling);
  for (const auto& [tenant, ceiling] : e.tenants) ValidateCeiling(p, absl::StrCat("egress.tenants.", tenant), ceiling);
  std::set<std::string> names;
  for (size_t i = 0; i < e.secrets.size(); ++i) {
    const EgressSecretOptions& s = e.secrets[i];
    const std::string where = absl::StrCat("egress.secrets[", i, "]");
    egress::PolicySpec spec;
    spec.secrets.push_back({s.name, "checked-at-start", s.hosts});
    if (auto built = egress::Policy::Build(spec, where); !built.ok()) p.Add(std::string(built.status().message()));
    if (!names.insert(s.name).second) p.Add(absl::StrCat(where, ": a second secret named ", s.name));
    if (s.value_file.empty() || s.value_file.front() != '/') {
      p.Add(absl::StrCat(where, ".value_file is '", s.value_file, "': give the absolute path of the file holding its value"));
    }
  }
  CheckPositive(p, "egress.max_connections_per_tenant", e.max_connections_per_tenant);
  CheckPositive(p, "egress.connect_timeout_ms", e.connect_timeout_ms);
  CheckPositive(p, "egress.idle_timeout_ms", e.idle_timeout_ms);
  if (e.io_threads < 1 || e.io_threads > 64) {
    p.Add(absl::StrCat("egress.io_threads is ", e.io_threads, "; it must be 1 to 64"));
  }
}

static void ValidateAgent(Problems& p, const AgentOptions& agent) {
  const LlmOptions& llm = agent.llm;
  if (!llm.base_url.empty()) {
    if (!absl::StartsWith(llm.base_url, "http://") && !absl::StartsWith(llm.base_url, "https://")) {
      p.Add(absl::StrCat("agent.llm.base_url is '", llm.base_url,
                         "'; it must be an http:// or https:// URL such as http://127.0.0.1:8000/v1"));
    }
    if (llm.model.empty()) {
      p.Add("agent.llm.model is empty: name the model the server serves (e.g. the name vLLM was started with)");
    }
  }
  if (!llm.api_key_env.empty() && !llm.api_key_file.empty()) {
    p.Add("agent.llm.api_key_env and agent.llm.api_key_file are both set: keep one");
  }
  if (llm.tools != "auto" && llm.tools != "native" && llm.tools != "text") {
    p.Add(absl::StrCat("agent.llm.tools is '", llm.tools, "'; it must be auto, native or text"));
  }
  static constexpr std::array<absl::string_view, 6> kToolNames = {
      "auto", "required", "execute_code", "write_file", "read_file", "list_files"};
  if (std::find(kToolNames.begin(), kToolNames.end(), llm.tool_choice) == kToolNames.end()) {
    p.Add(absl::StrCat("agent.llm.tool_choice is '", llm.tool_choice,
                       "'; it must be auto, required, or the name of a tool (execute_code, write_file, read_file, "
                       "list_files)"));
  }
  if (llm.temperature < 0 || llm.temperature > 2) {
    p.Add(absl::StrCat("agent.llm.temperature is ", llm.temperature, "; it must be 0 to 2"));
  }
  if (llm.max_retries < 0 || llm.max_retries > 20) {
    p.Add(absl::StrCat("agent.llm.max_retries is ", llm.max_retries, "; it must be 0 to 20"));
  }
  CheckPositive(p, "agent.llm.request_timeout_ms", llm.request_timeout_ms);
  CheckPositive(p, "agent.llm.max_tokens", llm.max_tokens);
  CheckPositive(p, "agent.max_observation_bytes", agent.max_observation_bytes);
  const std::tuple<const char*, int64_t, int64_t> budgets[] = {
      {"iterations", agent.default_max_iterations, agent.max_iterations},
      {"wall_ms", agent.default_max_wall_ms, agent.max_wall_ms},
      {"tokens", agent.default_max_tokens, agent.max_tokens}};
  for (const auto& [name, def, max] : budgets) {
    CheckPositive(p, absl::StrCat("agent.default_max_", name).c_str(), def);
    if (def > max) {
      p.Add(absl::StrCat("agent.default_max_", name, " (", def, ") is above agent.max_", name, " (", max,
                         "): lower the default or raise the maximum"));
    }
  }
}

absl::Status DaemonOptions::Validate() const {
  Problems p;

  // Listeners and their protection.
  const bool has_tls = !tls.cert_file.empty() && !tls.key_file.empty();
  if (listen.empty()) {
    p.Add("listen is empty: give at least one address, e.g. [\"unix:/run/warden/wardend.sock\"]");
  }
  std::set<std::string> seen;
  std::string network_listener;  // the first TCP listener that is not loopback
  for (size_t i = 0; i < listen.size(); ++i) {
    const std::string& address = listen[i];
    if (!seen.insert(address).second) {
      p.Add(absl::StrCat("listen has '", address, "' twice: list each address once"));
      continue;
    }
    absl::StatusOr<ListenAddress> parsed =
        ParseAddress(absl::StrCat("listen[", i, "]"), address, /*allow_unix=*/true,
                     /*allow_host_names=*/true);
    if (!parsed.ok()) {
      p.Add(std::string(parsed.status().message()));
      continue;
    }
    if (parsed->unix_socket) continue;
    if (!parsed->loopback && network_listener.empty()) network_listener = address;
    if (has_tls) continue;
    if (!parsed->loopback) {
      p.Add(absl::StrCat("TCP listener ", address,
                         " is not loopback and has no TLS: set tls.cert_file and tls.key_file "
                         "(allow_insecure_loopback covers only 127.0.0.0/8, ::1 and localhost)"));
    } else if (!allow_insecure_loopback) {
      p.Add(absl::StrCat("TCP listener ", address,
                         " has no TLS: set tls.cert_file/key_file, or set allow_insecure_loopback "
                         "for loopback-only testing"));
    }
  }
  // Whoever reaches a network listener could run code, so something must
  // say who is calling. (Who may connect to loopback is the operator's call.)
  if (!network_listener.empty() && auth.tokens_file.empty() && tls.client_ca_file.empty() &&
      fleet.gateway_ca_file.empty()) {
    p.Add(absl::StrCat("TCP listener ", network_listener,
                       " is reachable from the network but nothing authenticates callers: set "
                       "auth.tokens_file (bearer tokens), or tls.client_ca_file (mTLS)"));
  }
  if (!admin_listen.empty()) {
    absl::StatusOr<ListenAddress> parsed =
        ParseAddress("admin_listen", admin_listen, /*allow_unix=*/false,
                     /*allow_host_names=*/false);
    if (!parsed.ok()) p.Add(std::string(parsed.status().message()));
  }
  if (!http_listen.empty()) {
    absl::StatusOr<ListenAddress> parsed =
        ParseAddress("http_listen", http_listen, /*allow_unix=*/false, /*allow_host_names=*/false);
    if (!parsed.ok()) {
      p.Add(std::string(parsed.status().message()));
    } else if (auth.tokens_file.empty() && !parsed->loopback) {
      // The HTTP front has no TLS and no mTLS: bearer tokens are its only way
      // to know who calls.
      p.Add(absl::StrCat("http_listen ", http_listen,
                         " is reachable from the network but nothing authenticates callers: set "
                         "auth.tokens_file, and put a TLS-terminating proxy in front (the HTTP "
                         "front speaks plain HTTP)"));
    } else if (auth.tokens_file.empty() && !allow_insecure_loopback) {
      p.Add(absl::StrCat("http_listen ", http_listen,
                         " would run code for anyone on this host without a token: set "
                         "auth.tokens_file, or set allow_insecure_loopback for loopback-only use"));
    }
    if (http_listen == admin_listen) {
      p.Add(absl::StrCat("http_listen and admin_listen are both ", http_listen,
                         ": the HTTP front serves /metrics, /healthz and /readyz too; drop admin_listen "
                         "or give it another port"));
    }
  }

  // The HTTP front: its connections, and who may call it from a browser.
  fronts::CheckHttpSettings(http, p);

  // TLS.
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    p.Add(absl::StrCat("tls.", tls.cert_file.empty() ? "key_file" : "cert_file", " is set but tls.",
                       tls.cert_file.empty() ? "cert_file" : "key_file",
                       " is not: set both (the certificate chain and its private key)"));
  }
  if (!tls.client_ca_file.empty() && !has_tls) {
    p.Add(
        "tls.client_ca_file is set without tls.cert_file/key_file: mTLS needs the server's own "
        "certificate and key too");
  }
  for (const auto& [setting, file] :
       {std::pair<const char*, const std::string&>{"tls.cert_file", tls.cert_file},
        {"tls.key_file", tls.key_file},
        {"tls.client_ca_file", tls.client_ca_file}}) {
    if (file.empty()) continue;
    if (std::string problem = CheckReadableFile(setting, file); !problem.empty()) {
      p.Add(std::move(problem));
    }
  }

  // Limits.
  ValidateCellLimits(p, limits.defaults, limits.max);
  CheckPositive(p, "limits.max_code_bytes", limits.max_code_bytes);
  CheckPositive(p, "limits.max_file_bytes", limits.max_file_bytes);
  CheckPositive(p, "limits.pids", limits.pids);
  CheckPositive(p, "limits.tmpfs_mb", limits.tmpfs_mb);

  // Sessions.
  CheckPositive(p, "sessions.max_total", sessions.max_total);
  CheckPositive(p, "sessions.max_per_tenant", sessions.max_per_tenant);
  CheckPositive(p, "sessions.default_ttl_seconds", sessions.default_ttl_seconds);
  CheckPositive(p, "sessions.max_ttl_seconds", sessions.max_ttl_seconds);
  CheckPositive(p, "sessions.default_idle_timeout_seconds", sessions.default_idle_timeout_seconds);
  if (sessions.hibernate_after_seconds < 0) {
    p.Add(absl::StrCat("sessions.hibernate_after_seconds is ", sessions.hibernate_after_seconds,
                       ": use 0 (never) or a number of seconds"));
  }
  if (sessions.max_live < 0) {
    p.Add(absl::StrCat("sessions.max_live is ", sessions.max_live,
                       ": use 0 (no bound) or the number of sessions that may hold a sandbox at once"));
  }
  CheckPositive(p, "snapshots.max_bytes_per_tenant", snapshots.max_bytes_per_tenant);
  if (!snapshots.dir.empty() && snapshots.dir.front() != '/') {
    p.Add(absl::StrCat("snapshots.dir is '", snapshots.dir,
                       "': use an absolute path, e.g. /var/lib/warden/snapshots"));
  }
  if (sessions.default_ttl_seconds > sessions.max_ttl_seconds) {
    p.Add(absl::StrCat("sessions.default_ttl_seconds (", sessions.default_ttl_seconds,
                       ") is above sessions.max_ttl_seconds (", sessions.max_ttl_seconds,
                       "): lower the default or raise the maximum"));
  }

  // Templates and volumes.
  for (const auto& [key, dir] : {std::pair{"templates.dir", templates.dir}, std::pair{"volumes.dir", volumes.dir}}) {
    if (!dir.empty() && dir.front() != '/') {
      p.Add(absl::StrCat(key, " is '", dir, "': use an absolute path, e.g. /var/lib/warden/",
                         absl::string_view(key).substr(0, absl::string_view(key).find('.'))));
    }
  }
  CheckPositive(p, "templates.max_bytes_per_tenant", templates.max_bytes_per_tenant);
  CheckPositive(p, "templates.max_per_tenant", templates.max_per_tenant);
  CheckPositive(p, "templates.max_archive_bytes", templates.max_archive_bytes);
  CheckPositive(p, "templates.max_image_bytes", templates.max_image_bytes);
  CheckPositive(p, "templates.build_timeout_ms", templates.build_timeout_ms);
  CheckPositive(p, "templates.build_memory_mb", templates.build_memory_mb);
  CheckPositive(p, "templates.build_pids", templates.build_pids);
  CheckPositive(p, "templates.build_host_id_base", templates.build_host_id_base);
  CheckPositive(p, "volumes.max_bytes_per_tenant", volumes.max_bytes_per_tenant);
  CheckPositive(p, "volumes.max_per_tenant", volumes.max_per_tenant);
  CheckPositive(p, "volumes.max_mounts", volumes.max_mounts);
  if (volumes.default_bytes < (1 << 20) || volumes.default_bytes > volumes.max_bytes) {
    p.Add(absl::StrCat("volumes.default_bytes is ", volumes.default_bytes,
                       "; it must be at least 1 MiB and at most volumes.max_bytes (", volumes.max_bytes, ")"));
  }
  if (volumes.default_files < 16 || volumes.default_files > volumes.max_files) {
    p.Add(absl::StrCat("volumes.default_files is ", volumes.default_files,
                       "; it must be at least 16 and at most volumes.max_files (", volumes.max_files, ")"));
  }

  // Pools.
  std::set<std::tuple<std::string, int64_t, std::string>> profiles;
  for (size_t i = 0; i < pools.size(); ++i) {
    const PoolOptions& pool = pools[i];
    const std::string name = absl::StrCat("pools[", i, "]");
    const int64_t memory_mb = pool.memory_mb != 0 ? pool.memory_mb : limits.defaults.memory_mb;
    if (pool.memory_mb < 0 || pool.memory_mb > limits.max.memory_mb) {
      p.Add(absl::StrCat(name, ".memory_mb is ", pool.memory_mb, "; it must be 1 to limits.max.memory_mb (",
                         limits.max.memory_mb, "), or 0 for limits.defaults.memory_mb"));
    }
    if (auto parsed = ParseLanguage(pool.language); !parsed.ok() || LanguageName(*parsed) != pool.language) {
      p.Add(absl::StrCat(name, ".language is '", pool.language, "'; it must be ", LanguageChoices()));
    } else if (!profiles.insert({pool.language, memory_mb, pool.template_name}).second) {
      p.Add(absl::StrCat(name, " is a second pool for ", pool.language, " with ", memory_mb, " MiB",
                         pool.template_name.empty() ? "" : absl::StrCat(" in the template ", pool.template_name),
                         ": merge them into one pool and add up their sizes"));
    }
    if (!pool.template_name.empty()) {
      if (pool.language != "python" && pool.language != "javascript" && pool.language != "bash") {
        p.Add(absl::StrCat(name, ".template is set for a ", pool.language,
                           " pool; templates run python, javascript and bash"));
      }
      for (char c : pool.template_name) {
        if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
          p.Add(absl::StrCat(name, ".template is '", pool.template_name,
                             "', which is not a template name ([A-Za-z0-9._-])"));
          break;
        }
      }
    }
    if (pool.size < 0 || pool.size > 64) {
      p.Add(
          absl::StrCat(name, ".size is ", pool.size, "; it must be 0 to 64 (0: no warm workers)"));
    }
    if (pool.max_size != 0 && (pool.max_size < pool.size || pool.max_size > 256)) {
      p.Add(absl::StrCat(name, ".max_size is ", pool.max_size, "; it must be 0 (a fixed pool of `size`) or ",
                         pool.size, " (the size) to 256"));
    }
    if (!pool.warm.empty() && pool.language != "python") {
      p.Add(absl::StrCat(name, ".warm lists modules for a ", pool.language,
                         " pool; only python pools import modules ahead of time: remove it"));
    }
    for (const std::string& module : pool.warm) {
      if (!IsModuleName(module)) {
        p.Add(absl::StrCat(name, ".warm has '", module,
                           "', which is not a Python module name (e.g. numpy, matplotlib.pyplot)"));
      }
    }
    ValidatePolicy(p, name + ".network", pool.network);
    if (!pool.wheelhouse.empty()) {
      if (pool.language == "javascript") {
        p.Add(absl::StrCat(name, ".wheelhouse is set for a javascript pool; only python and bash "
                           "pools install Python packages: remove it"));
      } else if (std::string problem = CheckWheelhouse(name + ".wheelhouse", pool.wheelhouse);
                 !problem.empty()) {
        p.Add(std::move(problem));
      }
    }
  }

  // Admission.
  CheckPositive(p, "queue.max_depth", queue.max_depth);
  CheckPositive(p, "queue.max_wait_ms", queue.max_wait_ms);
  CheckPositive(p, "queue.max_waiting_per_tenant", queue.max_waiting_per_tenant);
  if (queue.max_running < 0) {
    p.Add(absl::StrCat("queue.max_running is ", queue.max_running,
                       "; it must be 0 (no limit but max_concurrent_per_tenant) or positive"));
  }
  CheckPositive(p, "max_concurrent_per_tenant", max_concurrent_per_tenant);
  if (shutdown_grace_ms < 0 || shutdown_grace_ms > 3'600'000) {
    p.Add(absl::StrCat("shutdown_grace_ms is ", shutdown_grace_ms,
                       "; it must be 0 to 3600000 (one hour); keep systemd's TimeoutStopSec above "
                       "it"));
  }

  // Fleet.
  if (fleet.enabled()) {
    if (absl::StatusOr<std::string> id = FleetOptions::NodeIdFrom(fleet.node_id); !id.ok()) {
      p.Add(std::string(id.status().message()));
    } else if (*id != fleet.node_id) {
      p.Add(absl::StrCat("fleet.node_id is '", fleet.node_id, "': write it as '", *id, "'"));
    }
    if (fleet.shared_dir.empty() || fleet.shared_dir.front() != '/') {
      p.Add(absl::StrCat("fleet.shared_dir is '", fleet.shared_dir,
                         "': a node of a fleet needs the shared snapshot storage every node mounts, "
                         "as an absolute path (e.g. /var/lib/warden/shared)"));
    }
  } else if (!fleet.shared_dir.empty() || !fleet.gateway_ca_file.empty()) {
    p.Add("fleet.shared_dir or fleet.gateway_ca_file is set without fleet.node_id (or WARDEN_NODE_ID): "
          "name the node, or leave the fleet section out");
  }
  if (fleet.gateway_ca_file.empty() != fleet.gateway_name.empty()) {
    p.Add("set fleet.gateway_ca_file and fleet.gateway_name together: the CA that signs only the "
          "gateway's client certificate, and the name in it");
  }
  if (!fleet.gateway_ca_file.empty()) {
    if (!has_tls) {
      p.Add("fleet.gateway_ca_file is set without tls.cert_file/key_file: the gateway reaches nodes over "
            "mutual TLS, so the node needs its own certificate and key too");
    }
    if (!tls.client_ca_file.empty()) {
      p.Add("fleet.gateway_ca_file and tls.client_ca_file are both set: in a fleet, clients reach nodes "
            "through the gateway, and the gateway's CA must sign nothing but the gateway's certificate; "
            "drop tls.client_ca_file");
    }
    if (std::string problem = CheckReadableFile("fleet.gateway_ca_file", fleet.gateway_ca_file);
        !problem.empty()) {
      p.Add(std::move(problem));
    }
  }
  if (fleet.drain_wait_ms < 0 || fleet.drain_wait_ms > 3'600'000) {
    p.Add(absl::StrCat("fleet.drain_wait_ms is ", fleet.drain_wait_ms, "; it must be 0 to 3600000"));
  }

  // Logging.
  if (log.format != "text" && log.format != "json") {
    p.Add(absl::StrCat("log.format is '", log.format, "'; it must be text or json"));
  }
  static constexpr const char* kLevels[] = {"trace", "debug", "info", "warn", "error"};
  if (std::find(std::begin(kLevels), std::end(kLevels), log.level) == std::end(kLevels)) {
    p.Add(absl::StrCat("log.level is '", log.level,
                       "'; it must be trace, debug, info, warn or error"));
  }

  // Executor: the host ids sandboxes map to must be nobody's.
  const uint64_t id_base = executor.host_id_base;
  const uint64_t id_end = id_base + executor.host_id_count;  // exclusive
  if (executor.host_id_count == 0) {
    p.Add("executor.host_id_count is 0; give sandboxes a range of host ids, e.g. 65536");
  }
  if (id_base < 65'536) {
    p.Add(absl::StrCat("executor.host_id_base is ", id_base,
                       "; ids below 65536 belong to real users and system accounts on most hosts: "
                       "use an unused range such as 1500000"));
  }
  if (id_end > 0xFFFF'FFFFull) {  // (uid_t)-1 is not an id
    p.Add(absl::StrCat("executor.host_id_base + host_id_count is ", id_end,
                       "; the range must end below 4294967295"));
  }
  // A template build's steps run as root of its own 65536 host ids
  // (server/template_build.h): never ids a sandbox runs as.
  const uint64_t build_base = static_cast<uint64_t>(std::max<int64_t>(templates.build_host_id_base, 0));
  const uint64_t build_end = build_base + 65'536;
  if (build_base < id_end && id_base < build_end) {
    p.Add(absl::StrCat("templates.build_host_id_base is ", build_base, ": its 65536 ids [", build_base, ", ",
                       build_end, ") overlap the sandboxes' [", id_base, ", ", id_end,
                       ") (executor.host_id_base, host_id_count); move one of them"));
  }
  if (build_base < 65'536 || build_end > 0xFFFF'FFFFull) {
    p.Add(absl::StrCat("templates.build_host_id_base is ", build_base,
                       "; use an unused range above 65535 and below 4294901760, such as 1000000"));
  }

  if (!kernels_dir.empty()) {
    struct stat st;
    if (kernels_dir.front() != '/') {
      p.Add(absl::StrCat("kernels_dir is '", kernels_dir, "': use an absolute path"));
    } else if (::stat(kernels_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      p.Add(absl::StrCat("kernels_dir is '", kernels_dir,
                         "', which is not a directory: point it at the installed kernels "
                         "(make install puts them in /usr/local/lib/warden/kernels)"));
    }
  }

  if (zygote.enabled && !zygote.program.empty() &&
      (zygote.program.front() != '/' || ::access(zygote.program.c_str(), X_OK) != 0)) {
    p.Add(absl::StrCat("zygote.program is '", zygote.program,
                       "', which is not an executable absolute path: point it at "
                       "warden-python-zygote, or leave it out to use the one beside wardend"));
  }

  ValidateAgent(p, agent);
  ValidateEgress(p, egress);
  if (!state_dir.empty() && state_dir.front() != '/') {
    p.Add(absl::StrCat("state_dir is '", state_dir, "': use an absolute path, e.g. /run/warden"));
  }
  if (!socket_group.empty()) {
    if (std::none_of(listen.begin(), listen.end(),
                     [](const std::string& a) { return absl::StartsWith(a, "unix:"); })) {
      p.Add(absl::StrCat("socket_group is '", socket_group,
                         "' but no listen address is a unix: socket: add one or leave socket_group out"));
    } else if (getgrnam(socket_group.c_str()) == nullptr) {
      p.Add(absl::StrCat("socket_group is '", socket_group, "', which is not a group on this host: create it (",
                         "groupadd --system ", socket_group, ") or leave socket_group out"));
    }
  }
  return p.ToStatus("the configuration");
}

std::string DaemonOptions::StateDirectory() const {
  if (!state_dir.empty()) return state_dir;
  for (const std::string& address : listen) {
    if (!absl::StartsWith(address, "unix:")) continue;
    const std::string path = address.substr(5);
    const size_t slash = path.rfind('/');
    return slash == 0 ? "/" : path.substr(0, slash);
  }
  return "";
}

std::string DaemonOptions::TemplateDirectory() const {
  if (!templates.dir.empty()) return templates.dir;
  if (fleet.enabled() && !fleet.shared_dir.empty()) return fleet.shared_dir + "/templates";
  return "/var/lib/warden/templates";
}

std::string DaemonOptions::VolumeDirectory() const {
  if (!volumes.dir.empty()) return volumes.dir;
  if (fleet.enabled() && !fleet.shared_dir.empty()) return fleet.shared_dir + "/volumes";
  return "/var/lib/warden/volumes";
}

std::string DaemonOptions::SnapshotDirectory() const {
  if (snapshots.dir.empty() && fleet.enabled() && !fleet.shared_dir.empty()) {
    return fleet.shared_dir + "/snapshots";
  }
  return snapshots.Directory();
}

absl::StatusOr<std::string> FleetOptions::NodeIdFrom(const std::string& name) {
  std::string id = absl::AsciiStrToLower(name);
  for (char& c : id) {
    if (c == '.' || c == '_') c = '-';
  }
  const bool label = !id.empty() && id.size() <= 253 && id.front() != '-' && id.back() != '-' &&
                     std::all_of(id.begin(), id.end(), [](char c) {
                       return absl::ascii_islower(static_cast<unsigned char>(c)) ||
                              absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-';
                     });
  if (!label) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node id '", name, "' (fleet.node_id or WARDEN_NODE_ID) must be letters, digits, '-', '.' or "
        "'_', starting and ending with a letter or digit, e.g. the Swarm node id or the Kubernetes "
        "node name"));
  }
  if (id.size() > kMaxNodeIdBytes) {
    // Session ids must stay short (warden-keeper's records hold 63 bytes):
    // a long name keeps its start and gets a digest of the whole (FNV-1a).
    uint32_t h = 2166136261u;
    for (unsigned char c : id) h = (h ^ c) * 16777619u;
    id = absl::StrCat(id.substr(0, kMaxNodeIdBytes - 9), "-", absl::Hex(h, absl::kZeroPad8));
    if (id[kMaxNodeIdBytes - 10] == '-') id[kMaxNodeIdBytes - 10] = '0';
  }
  return id;
}

bool IsLoopbackListenAddress(const std::string& address) {
  auto parsed = ParseAddress("listen", address, /*allow_unix=*/false, /*allow_host_names=*/true);
  return parsed.ok() && parsed->loopback;
}

}  // namespace warden
