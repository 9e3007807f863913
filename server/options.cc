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
#include "nlohmann/json.hpp"

namespace warden {
namespace {

using Json = nlohmann::json;

// Collects problems so the operator sees all of them in one go.
class Problems {
 public:
  void Add(std::string message) { messages_.push_back(std::move(message)); }
  bool empty() const { return messages_.empty(); }

  absl::Status ToStatus(absl::string_view what) const {
    if (messages_.empty()) return absl::OkStatus();
    if (messages_.size() == 1) return absl::InvalidArgumentError(messages_.front());
    return absl::InvalidArgumentError(absl::StrCat(messages_.size(), " problems in ", what, ":\n  ",
                                                   absl::StrJoin(messages_, "\n  ")));
  }

 private:
  std::vector<std::string> messages_;
};

// Levenshtein distance, for "did you mean" on unknown keys.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "a string \"30s\"", "the number 1.5", "null", ... for type errors.
std::string Describe(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return absl::StrCat("the boolean ", value.dump());
    case Json::value_t::string: {
      std::string text = value.dump();
      if (text.size() > 40) text = absl::StrCat(text.substr(0, 37), "...");
      return absl::StrCat("the string ", text);
    }
    case Json::value_t::number_float:
      return absl::StrCat("the number ", value.dump());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return absl::StrCat("the integer ", value.dump());
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

// Reads one JSON object's keys into fields. Every key the code asks for is
// "known"; Finish() reports the keys nobody asked for, with the known list
// and a suggestion for a likely typo.
class ObjectReader {
 public:
  // `path` is "" for the top level, else "limits.defaults", "pools[1]", ...
  ObjectReader(const Json& object, std::string path, const std::string& file, Problems* problems)
      : object_(object), path_(std::move(path)), file_(file), problems_(problems) {}

  void Int(const char* key, int64_t* out) {
    ReadInteger(key, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                [out](int64_t v) { *out = v; });
  }
  void Int(const char* key, int* out) {
    ReadInteger(key, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
                [out](int64_t v) { *out = static_cast<int>(v); });
  }
  void Uint32(const char* key, uint32_t* out) {
    ReadInteger(key, 0, std::numeric_limits<uint32_t>::max(),
                [out](int64_t v) { *out = static_cast<uint32_t>(v); });
  }

  void Bool(const char* key, bool* out) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_boolean()) return TypeError(key, *value, "true or false");
    *out = value->get<bool>();
  }

  void Double(const char* key, double* out) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_number()) return TypeError(key, *value, "a number");
    *out = value->get<double>();
  }

  void String(const char* key, std::string* out) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_string()) return TypeError(key, *value, "a string");
    *out = value->get<std::string>();
  }

  void StringList(const char* key, std::vector<std::string>* out) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_array()) return TypeError(key, *value, "an array of strings");
    std::vector<std::string> result;
    for (size_t i = 0; i < value->size(); ++i) {
      const Json& item = (*value)[i];
      if (!item.is_string()) {
        return TypeError(absl::StrCat(key, "[", i, "]"), item, "a string");
      }
      result.push_back(item.get<std::string>());
    }
    *out = std::move(result);
  }

  // Reads a nested object with `read`, which gets a reader for it.
  void Object(const char* key, const std::function<void(ObjectReader&)>& read) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_object()) return TypeError(key, *value, "an object {...}");
    ObjectReader nested(*value, Child(key), file_, problems_);
    read(nested);
    nested.Finish();
  }

  // Reads an array of objects, each with `read(index, reader)`; `on_array`
  // runs first with the array's size (to replace a default list).
  void ObjectList(const char* key, const std::function<void(size_t)>& on_array,
                  const std::function<void(size_t, ObjectReader&)>& read) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_array()) return TypeError(key, *value, "an array of objects [{...}, ...]");
    on_array(value->size());
    for (size_t i = 0; i < value->size(); ++i) {
      const std::string item_key = absl::StrCat(key, "[", i, "]");
      const Json& item = (*value)[i];
      if (!item.is_object()) {
        TypeError(item_key, item, "an object {...}");
        continue;
      }
      ObjectReader nested(item, Child(item_key), file_, problems_);
      read(i, nested);
      nested.Finish();
    }
  }

  bool Has(const char* key) const { return object_.contains(key); }
  const std::string& path() const { return path_; }

  void Finish() {
    for (const auto& [key, value] : object_.items()) {
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string message =
          absl::StrCat("unknown key '", key, "' ",
                       path_.empty() ? "at the top level" : absl::StrCat("in ", path_), " of ",
                       file_, "; known keys: ", absl::StrJoin(known_, ", "));
      std::string best;
      size_t best_distance = 3;  // suggest only close matches
      for (const std::string& candidate : known_) {
        size_t d = EditDistance(absl::AsciiStrToLower(key), candidate);
        if (d < best_distance) {
          best_distance = d;
          best = candidate;
        }
      }
      if (!best.empty()) absl::StrAppend(&message, ". Did you mean '", best, "'?");
      problems_->Add(std::move(message));
    }
  }

 private:
  const Json* Find(const char* key) {
    known_.push_back(key);
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  std::string Child(absl::string_view key) const {
    return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  }

  void TypeError(absl::string_view key, const Json& value, absl::string_view expected) {
    problems_->Add(
        absl::StrCat(Child(key), " in ", file_, " must be ", expected, ", not ", Describe(value)));
  }

  void ReadInteger(const char* key, int64_t min, int64_t max,
                   const std::function<void(int64_t)>& store) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_number_integer()) return TypeError(key, *value, "an integer");
    if (value->is_number_unsigned() &&
        value->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      problems_->Add(absl::StrCat(Child(key), " in ", file_, " is ", value->dump(),
                                  "; it must be at most ", max));
      return;
    }
    const int64_t v = value->get<int64_t>();
    if (v < min || v > max) {
      problems_->Add(absl::StrCat(Child(key), " in ", file_, " is ", v, "; it must be between ",
                                  min, " and ", max));
      return;
    }
    store(v);
  }

  const Json& object_;
  const std::string path_;
  const std::string& file_;
  Problems* problems_;
  std::vector<std::string> known_;  // in the order the code reads them
};

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
}

// nlohmann's message without its "[json.exception.parse_error.101] parse
// error at line 3, column 1: syntax error " prefix; we give the position.
std::string ParseErrorDetail(const std::string& what) {
  absl::string_view detail = what;
  if (size_t p = detail.find("syntax error "); p != absl::string_view::npos) {
    detail.remove_prefix(p + 13);
  } else if (size_t q = detail.find("] "); q != absl::string_view::npos) {
    detail.remove_prefix(q + 2);
  }
  return std::string(detail);
}

absl::Status SyntaxError(const std::string& path, const std::string& text,
                         const nlohmann::json::parse_error& e) {
  // e.byte is 1-based: the offending character (or one past the end).
  const size_t offset = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  const size_t column = offset - line_start + 1;
  std::string message = absl::StrCat(path, ": JSON syntax error at line ", line, ", column ",
                                     column, ": ", ParseErrorDetail(e.what()));
  // nlohmann reports the end of the token it could not use.
  // The two classic mistakes in hand-written JSON.
  const absl::string_view line_text =
      absl::string_view(text).substr(line_start, std::min(text.size(), offset + 2) - line_start);
  const std::string detail = ParseErrorDetail(e.what());
  if (absl::StrContains(line_text, "//") || absl::StrContains(line_text, "/*")) {
    absl::StrAppend(&message, " (JSON has no comments; docs/operations.md documents every key)");
  } else {
    size_t before = offset;
    while (before > 0 && absl::ascii_isspace(static_cast<unsigned char>(text[before - 1]))) {
      --before;
    }
    if (before > 0 && text[before - 1] == ',' && offset < text.size() &&
        (text[offset] == '}' || text[offset] == ']')) {
      absl::StrAppend(&message, " (remove the trailing comma)");
    } else if (absl::StrContains(detail, "unexpected string literal; expected '}'") ||
               absl::StrContains(detail, "; expected ']'")) {
      absl::StrAppend(&message, " (is a comma missing before it?)");
    }
  }
  return absl::InvalidArgumentError(message);
}

// ---------------------------------------------------------------------------
// Validation helpers.

struct ListenAddress {
  bool unix_socket = false;
  std::string path;  // unix
  std::string host;  // tcp, without brackets
  int port = 0;
  bool loopback = false;
};

bool IsLoopbackHost(const std::string& host) {
  const std::string lower = absl::AsciiStrToLower(host);
  if (lower == "localhost" || lower == "localhost.") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

bool IsHostName(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
  }
  return host.front() != '-' && host.front() != '.';
}

// `what` names the setting for messages ("listen[0]", "admin_listen").
// gRPC listeners may be UNIX sockets and host names; the HTTP front
// (fronts/http/server.h) binds IP literals and "localhost" only.
absl::StatusOr<ListenAddress> ParseAddress(const std::string& what, const std::string& address,
                                           bool allow_unix, bool allow_host_names) {
  ListenAddress out;
  if (absl::StartsWith(address, "unix:")) {
    if (!allow_unix) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address, "': it must be HOST:PORT, e.g. 127.0.0.1:9464"));
    }
    out.unix_socket = true;
    out.path = address.substr(5);
    if (out.path.empty() || out.path.front() != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " is '", address,
          "': a UNIX socket needs an absolute path, e.g. unix:/run/warden/wardend.sock"));
    }
    if (out.path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address, "': the socket path is ", out.path.size(),
                       " bytes; UNIX socket paths must be shorter than ",
                       sizeof(sockaddr_un{}.sun_path), " (use a shorter directory)"));
    }
    return out;
  }
  const std::string example = allow_unix ? "unix:/run/warden/wardend.sock, 127.0.0.1:7000 or "
                                           "[::1]:7000"
                                         : "127.0.0.1:9464 or [::1]:9464";
  std::string port_text;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == std::string::npos || address.compare(close, 2, "]:") != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address,
                       "': write an IPv6 address with its port as [ADDRESS]:PORT, "
                       "e.g. [::1]:7000"));
    }
    out.host = address.substr(1, close - 1);
    port_text = address.substr(close + 2);
    in6_addr v6;
    if (inet_pton(AF_INET6, out.host.c_str(), &v6) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address, "': '", out.host, "' is not an IPv6 address"));
    }
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address, "': expected ", example));
    }
    out.host = address.substr(0, colon);
    port_text = address.substr(colon + 1);
    if (out.host.find(':') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " is '", address, "': put an IPv6 address in brackets, e.g. [::1]:7000"));
    }
    if (out.host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address, "': name the host, e.g. 127.0.0.1", address,
                       " (or 0.0.0.0", address, " for every interface)"));
    }
    in_addr v4;
    if (inet_pton(AF_INET, out.host.c_str(), &v4) != 1 && !IsHostName(out.host)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is '", address, "': '", out.host,
                                                     "' is neither an IP address nor a host name"));
    }
    if (!allow_host_names && inet_pton(AF_INET, out.host.c_str(), &v4) != 1 &&
        absl::AsciiStrToLower(out.host) != "localhost") {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address,
                       "': use an IP address or localhost, e.g. 127.0.0.1:9464 or "
                       "0.0.0.0:9464, not a host name"));
    }
  }
  int port = 0;
  if (port_text.empty() ||
      !std::all_of(port_text.begin(), port_text.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
      !absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535) {
    // Port 0 asks for any free port (tests; the bound port is logged).
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is '", address, "': the port must be 1 to 65535 (or 0 for any free port)"));
  }
  out.port = port;
  out.loopback = IsLoopbackHost(out.host);
  return out;
}

// An empty string when `path` is a readable regular file, else the problem.
std::string CheckReadableFile(const std::string& setting, const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::StrCat(setting, " is '", path, "': ", std::strerror(errno),
                        "; point it at an existing PEM file");
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::StrCat(setting, " is '", path, "': not a regular file; point it at a PEM file");
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return absl::StrCat(setting, " is '", path, "': ", std::strerror(errno),
                        "; make it readable by wardend's user");
  }
  return "";
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

void CheckPositive(Problems& p, const std::string& name, int64_t value) {
  if (value <= 0) p.Add(absl::StrCat(name, " is ", value, "; it must be positive"));
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
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return absl::ErrnoToStatus(
        err, absl::StrCat("cannot read configuration file ", path,
                          err == ENOENT ? " (pass --config FILE; deploy/wardend.json is the "
                                          "default configuration)"
                                        : ""));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat("reading configuration file ", path, " failed"));
  }

  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return SyntaxError(path, text, e);
  } catch (const Json::out_of_range& e) {  // a number too large for any C++ type
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what(), "; use a smaller number"));
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the configuration must be a JSON object {...}, not ", Describe(json)));
  }

  DaemonOptions options;
  Problems problems;
  ObjectReader reader(json, "", path, &problems);
  ReadDaemonOptions(reader, &options);
  reader.Finish();
  if (absl::Status s = problems.ToStatus(path); !s.ok()) return s;
  return options;
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
  if (!network_listener.empty() && auth.tokens_file.empty() && tls.client_ca_file.empty()) {
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

  // Pools.
  std::set<std::pair<std::string, int64_t>> profiles;
  for (size_t i = 0; i < pools.size(); ++i) {
    const PoolOptions& pool = pools[i];
    const std::string name = absl::StrCat("pools[", i, "]");
    const int64_t memory_mb = pool.memory_mb != 0 ? pool.memory_mb : limits.defaults.memory_mb;
    if (pool.memory_mb < 0 || pool.memory_mb > limits.max.memory_mb) {
      p.Add(absl::StrCat(name, ".memory_mb is ", pool.memory_mb, "; it must be 1 to limits.max.memory_mb (",
                         limits.max.memory_mb, "), or 0 for limits.defaults.memory_mb"));
    }
    if (pool.language != "python" && pool.language != "javascript" && pool.language != "bash") {
      p.Add(absl::StrCat(name, ".language is '", pool.language,
                         "'; it must be python, javascript or bash"));
    } else if (!profiles.insert({pool.language, memory_mb}).second) {
      p.Add(absl::StrCat(name, " is a second pool for ", pool.language, " with ", memory_mb,
                         " MiB: merge them into one pool and add up their sizes"));
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

bool IsLoopbackListenAddress(const std::string& address) {
  auto parsed = ParseAddress("listen", address, /*allow_unix=*/false, /*allow_host_names=*/true);
  return parsed.ok() && parsed->loopback;
}

}  // namespace warden
