#include "fronts/e2b/e2b_front.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <type_traits>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/call_metadata.h"
#include "common/status_macros.h"
#include "fronts/e2b/access_token.h"
#include "fronts/e2b/envd_front.h"
#include "fronts/e2b/execution_lines.h"
#include "fronts/e2b/file_signature.h"
#include "fronts/e2b/gzip.h"
#include "fronts/e2b/home_path.h"
#include "fronts/e2b/multipart.h"
#include "fronts/e2b/sandbox_list.h"
#include "fronts/e2b/stream_events.h"
#include "fronts/http/credentials.h"
#include "fronts/http/exchange.h"
#include "fronts/http/status.h"
#include "fronts/http/upstream.h"
#include "spdlog/spdlog.h"

namespace warden::e2b {
namespace {

using nlohmann::json;

constexpr absl::Duration kCallTimeout = absl::Minutes(2);
constexpr int64_t kForkDefaultTimeoutSeconds = 15;
constexpr char kPathHint[] = "give the file's path in ?path=";
// E2B's "all traffic" (its SDKs' ALL_TRAFFIC): every destination, names too.
constexpr char kAllTraffic[] = "0.0.0.0/0";

std::string Rfc3339(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

// What a sandbox carries in its session's labels, so that any front, also
// one started after the sandbox was made, knows it (Labels, InfoOf).
struct SandboxInfo {
  std::string template_id;  // as the client asked for it (a snapshot's id for a restore)
  json metadata = json::object();
  bool auto_resume = false;     // a request to the paused sandbox resumes it (lifecycle.autoResume)
};

constexpr char kTemplateLabel[] = "e2b.template";  // the served template: what List filters on
constexpr char kTemplateIdLabel[] = "e2b.template_id";
constexpr char kMetadataLabel[] = "e2b.metadata";
constexpr char kAutoResumeLabel[] = "e2b.auto_resume";
constexpr size_t kMaxLabelValue = 255;  // warden.v1's bound on a label's value

SandboxInfo InfoOf(const v1::Session& session, const std::string& served_template) {
  SandboxInfo info;
  const auto& labels = session.labels();
  auto label = [&labels](const char* key) {
    auto it = labels.find(key);
    return it == labels.end() ? std::string() : it->second;
  };
  info.template_id = label(kTemplateIdLabel);
  if (info.template_id.empty()) info.template_id = served_template;
  if (const std::string metadata = label(kMetadataLabel); !metadata.empty()) {
    json parsed = json::parse(metadata, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) info.metadata = std::move(parsed);
  }
  info.auto_resume = label(kAutoResumeLabel) == "true";
  return info;
}

// What a front keeps of a sandbox it has seen: a cache, rebuilt from the
// session (its labels, its contexts) by any front that has not.
struct Record {
  explicit Record(SandboxInfo info_in) : info(std::move(info_in)) {}
  const SandboxInfo info;
  absl::Mutex mu;
  // The default contexts beyond Python's, by language; `contexts_known`
  // once they were listed (or the sandbox is new).
  std::map<v1::Language, std::string> default_contexts ABSL_GUARDED_BY(mu);
  bool contexts_known ABSL_GUARDED_BY(mu) = false;
  // The last metrics sample: when, and the CPU time used by then (ns).
  std::optional<std::pair<absl::Time, int64_t>> last_sample ABSL_GUARDED_BY(mu);
  // When its session ends, as last seen (its TTL; later if it was extended
  // or paused since): past it, the sandbox is looked up again before use.
  // Unix milliseconds; atomics, so that the cache's sweep never waits for
  // `mu` (held across a warden.v1 call by DefaultContext).
  std::atomic<int64_t> ends_ms{INT64_MAX};
  std::atomic<int64_t> used_ms{absl::ToUnixMillis(absl::Now())};

  void Seen(const v1::Session& session) {
    ends_ms = session.expires_unix_ms() > 0 ? session.expires_unix_ms() : INT64_MAX;
  }
  bool Ended(absl::Time now) const { return ends_ms.load() < absl::ToUnixMillis(now); }
};

// The sandboxes this front has seen, bounded: records of sandboxes that
// ended are forgotten (looked up again, their tokens then answer 502 as a
// killed sandbox's do), and past kMaxRecords the least recently used go;
// a forgotten one that still lives is rebuilt on its next request. Signed
// URLs are checked against the access tokens seen (file_signature.h),
// which are kept apart from the records in a list the checks read without
// any lock.
class Sandboxes {
 public:
  static constexpr size_t kMaxRecords = 4096;
  static constexpr size_t kTokensPerSandbox = 4;

  std::shared_ptr<Record> Get(const std::string& id) const {
    absl::MutexLock lock(&mu_);
    auto it = records_.find(id);
    if (it == records_.end()) return nullptr;
    it->second->used_ms = absl::ToUnixMillis(absl::Now());
    return it->second;
  }
  // The cached record of `session`, or a new one from its labels.
  std::shared_ptr<Record> GetOrAdd(const v1::Session& session, const std::string& served_template) {
    std::shared_ptr<Record> record;
    {
      absl::MutexLock lock(&mu_);
      std::shared_ptr<Record>& slot = records_[session.id()];
      if (!slot) slot = std::make_shared<Record>(InfoOf(session, served_template));
      record = slot;
      if (records_.size() > kMaxRecords) Sweep();
    }
    record->Seen(session);
    return record;
  }
  void Remove(const std::string& id) {
    absl::MutexLock lock(&mu_);
    records_.erase(id);
    DropTokens(id);
  }
  // Remembers an access token made or presented for sandbox `id`.
  void Remember(const std::string& id, const std::string& access_token) {
    absl::MutexLock lock(&mu_);
    size_t mine = 0;
    for (const auto& [token, owner] : *tokens_) {
      if (token == access_token) return;
      mine += owner == id ? 1 : 0;
    }
    auto next = std::make_shared<TokenList>(*tokens_);
    if (mine >= kTokensPerSandbox) {  // its oldest goes
      next->erase(std::find_if(next->begin(), next->end(), [&id](const auto& t) { return t.second == id; }));
    }
    next->emplace_back(access_token, id);
    tokens_ = std::move(next);
  }
  // The sandbox and the access token that signed `url`, among the tokens
  // seen since this front started (only sandbox `named`'s, when the request
  // names one); no lock is held while checking.
  std::optional<std::pair<std::string, std::string>> SignedBy(const SignedUrl& url, const std::string& named) const {
    std::shared_ptr<const TokenList> tokens;
    {
      absl::MutexLock lock(&mu_);
      tokens = tokens_;
    }
    for (const auto& [token, id] : *tokens) {
      if (!named.empty() && id != named) continue;
      if (SignedWith(url, token)) return std::make_pair(id, token);
    }
    return std::nullopt;
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return records_.size();
  }

 private:
  using TokenList = std::vector<std::pair<std::string, std::string>>;  // {token, sandbox id}

  // Forgets what has ended, then the least recently used, down to 3/4 of
  // the bound (so that sweeps are rare).
  void Sweep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time now = absl::Now();
    std::set<std::string> gone;
    std::vector<std::pair<int64_t, std::string>> by_use;
    for (const auto& [id, record] : records_) {
      if (record->Ended(now)) {
        gone.insert(id);
      } else {
        by_use.emplace_back(record->used_ms.load(), id);
      }
    }
    std::sort(by_use.begin(), by_use.end());
    for (size_t i = 0; records_.size() - gone.size() > kMaxRecords * 3 / 4 && i < by_use.size(); ++i) {
      gone.insert(by_use[i].second);
    }
    for (const std::string& id : gone) records_.erase(id);
    DropTokens(gone);
  }
  void DropTokens(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { DropTokens(std::set<std::string>{id}); }
  void DropTokens(const std::set<std::string>& ids) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto next = std::make_shared<TokenList>();
    for (const auto& entry : *tokens_) {
      if (ids.count(entry.second) == 0) next->push_back(entry);
    }
    if (next->size() != tokens_->size()) tokens_ = std::move(next);
  }

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Record>> records_ ABSL_GUARDED_BY(mu_);
  // Replaced whole on every change (rare: a new token), read without a lock.
  std::shared_ptr<const TokenList> tokens_ ABSL_GUARDED_BY(mu_) = std::make_shared<TokenList>();
};

absl::Status FromGrpc(const grpc::Status& status) { return http::FromGrpc(status); }

// A sandbox that ended (killed, or past its end of life), asked for with its
// own valid access token. E2B's proxy answers such requests with 502 and
// "The sandbox was not found", which the SDKs read as "the sandbox is gone"
// (isRunning() false; the Python SDK's SandboxNotRunningException, which it
// tells by those words); envd's Connect routes see UNAVAILABLE, as Connect
// clients read a 502. Marked by a payload so the sandbox plane can answer
// 502 (add_plane in AddE2bRoutes).
constexpr char kNotRunningUrl[] = "type.googleapis.com/warden.e2b.SandboxNotRunning";

absl::Status SandboxNotRunning(const std::string& id) {
  absl::Status status = absl::UnavailableError(
      absl::StrCat("The sandbox was not found: sandbox ", id,
                   " is not running, it was killed or reached its end of life"));
  status.SetPayload(kNotRunningUrl, absl::Cord(id));
  return status;
}

bool IsSandboxNotRunning(const absl::Status& status) { return status.GetPayload(kNotRunningUrl).has_value(); }

// A field of a client's JSON object, or InvalidArgument naming it: never
// nlohmann's exception for a value of the wrong type.
template <typename T>
absl::StatusOr<T> Field(const json& body, const char* key, T fallback) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return fallback;
  if constexpr (std::is_same_v<T, bool>) {
    if (it->is_boolean()) return it->template get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (it->is_number_integer()) return it->template get<T>();
  } else {
    if (it->is_string()) return it->template get<std::string>();
  }
  return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" has the wrong type"));
}

absl::StatusOr<json> JsonBody(const http::Request& request, bool allow_empty) {
  if (request.body().empty() && allow_empty) return json::object();
  json body = json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return absl::InvalidArgumentError("the request body must be a JSON object");
  }
  return body;
}

// E2B's language names to Warden's.
absl::StatusOr<v1::Language> LanguageOf(const json& value) {
  if (value.is_null()) return v1::LANGUAGE_PYTHON;
  if (!value.is_string()) return absl::InvalidArgumentError("language must be a string");
  const std::string name = absl::AsciiStrToLower(value.get<std::string>());
  if (name.empty() || name == "python" || name == "python3") return v1::LANGUAGE_PYTHON;
  if (name == "js" || name == "javascript" || name == "node") return v1::LANGUAGE_JAVASCRIPT;
  if (name == "bash" || name == "sh") return v1::LANGUAGE_BASH;
  if (name == "ts" || name == "typescript") return v1::LANGUAGE_TYPESCRIPT;
  if (name == "r") return v1::LANGUAGE_R;
  if (name == "java") return v1::LANGUAGE_JAVA;
  return absl::InvalidArgumentError(absl::StrCat("language '", name,
                                                 "' is not served by Warden: use python, js (javascript), "
                                                 "ts (typescript), r, java or bash"));
}

std::string LanguageName(v1::Language language) {
  switch (language) {
    case v1::LANGUAGE_JAVASCRIPT: return "javascript";
    case v1::LANGUAGE_BASH: return "bash";
    case v1::LANGUAGE_TYPESCRIPT: return "typescript";
    case v1::LANGUAGE_R: return "r";
    case v1::LANGUAGE_JAVA: return "java";
    default: return "python";
  }
}

json SandboxJson(const v1::Session& session, const E2bOptions& options) {
  const SandboxInfo info = InfoOf(session, options.template_id);
  json out = {{"sandboxID", session.id()},
              {"templateID", info.template_id},
              {"alias", options.template_id},
              {"clientID", "warden"},
              {"envdVersion", options.envd_version},
              {"startedAt", Rfc3339(session.created_unix_ms())},
              {"endAt", Rfc3339(session.expires_unix_ms())},
              {"cpuCount", 1},
              {"memoryMB", session.limits().memory_mb()},
              {"diskSizeMB", 0},
              {"state", session.state() == v1::SESSION_STATE_PAUSED ? "paused" : "running"},
              {"metadata", info.metadata}};
  // The network as E2B describes it (header values hidden).
  const v1::NetworkPolicy& network = session.network();
  auto e2b_entry = [](const std::string& entry) { return entry == "*" ? std::string(kAllTraffic) : entry; };
  json allow = json::array(), deny = json::array(), rules = json::object();
  bool all_denied = !session.has_network();
  for (const std::string& a : network.allow()) allow.push_back(e2b_entry(a));
  for (const std::string& d : network.deny()) {
    deny.push_back(e2b_entry(d));
    all_denied |= d == "*";
  }
  for (const v1::HeaderRule& r : network.header_rules()) {
    json headers = json::object();
    for (const auto& [name, value] : r.headers()) headers[name] = value;
    rules[r.host()] = json::array({{{"transform", {{"headers", headers}}}}});
  }
  out["allowInternetAccess"] = session.has_network() && network.allow_by_default() && !all_denied;
  out["network"] = {{"allowOut", allow},
                    {"denyOut", deny},
                    {"rules", rules},
                    {"allowPublicTraffic", session.ports().public_()}};
  if (!session.ports().host_header().empty()) out["network"]["maskRequestHost"] = session.ports().host_header();
  if (!options.sandbox_domain.empty()) out["domain"] = options.sandbox_domain;
  return out;
}

// E2B's network options (create's `network` and `allow_internet_access`,
// updateNetwork's body) as a Warden policy: everything is allowed unless
// denied (E2B's default), denyOut narrows it, allowOut wins over denyOut,
// allow_internet_access false denies all traffic, "0.0.0.0/0" is all
// traffic; rules' transforms are header rules. The tenant's ceiling then
// narrows it all, so without egress from the operator nothing goes out.
absl::StatusOr<v1::NetworkPolicy> NetworkOf(const json& network, bool internet) {
  v1::NetworkPolicy policy;
  policy.set_allow_by_default(true);
  auto entries = [](const json& body, const char* key, auto* out) -> absl::Status {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_array()) return absl::InvalidArgumentError(absl::StrCat("network.", key, " must be a list of strings"));
    for (const json& e : *it) {
      if (!e.is_string()) return absl::InvalidArgumentError(absl::StrCat("network.", key, " must be a list of strings"));
      const std::string entry = e.get<std::string>();
      *out->Add() = entry == kAllTraffic ? std::string("*") : entry;
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(entries(network, "allowOut", policy.mutable_allow()));
  RETURN_IF_ERROR(entries(network, "denyOut", policy.mutable_deny()));
  if (!internet) policy.add_deny("*");
  if (auto it = network.find("egressProxy"); it != network.end() && !it->is_null()) {
    return absl::InvalidArgumentError(
        "network.egressProxy (a SOCKS5 proxy of yours) is not served: Warden's sandboxes go out through its own "
        "egress proxy, on the host");
  }
  if (auto it = network.find("httpsPorts"); it != network.end() && !it->is_null() && !it->empty()) {
    return absl::InvalidArgumentError(
        "network.httpsPorts is not served: an exposed port is reached as plain HTTP (or WebSocket); serve "
        "plain HTTP on it");
  }
  if (auto it = network.find("rules"); it != network.end() && !it->is_null()) {
    if (!it->is_object()) return absl::InvalidArgumentError("network.rules must be an object {host: [rule, ...]}");
    for (const auto& [host, list] : it->items()) {
      if (!list.is_array()) return absl::InvalidArgumentError(absl::StrCat("network.rules[", host, "] must be a list"));
      v1::HeaderRule* rule = policy.add_header_rules();
      rule->set_host(host);
      // A host's rules apply in order: a later one's header wins.
      for (const json& r : list) {
        if (!r.is_object()) return absl::InvalidArgumentError(absl::StrCat("network.rules[", host, "] holds a non-object"));
        auto transform = r.find("transform");
        if (transform == r.end() || transform->is_null()) continue;
        auto headers = transform->find("headers");
        if (headers == transform->end() || headers->is_null()) continue;
        if (!headers->is_object()) {
          return absl::InvalidArgumentError(absl::StrCat("network.rules[", host, "].transform.headers must be an object"));
        }
        for (const auto& [name, value] : headers->items()) {
          if (!value.is_string()) {
            return absl::InvalidArgumentError(absl::StrCat("network.rules[", host, "]: header ", name, " must be a string"));
          }
          (*rule->mutable_headers())[name] = value.get<std::string>();
        }
      }
    }
  }
  return policy;
}

// The access token a sandbox-plane request presents: X-Access-Token, or
// E2B-Traffic-Access-Token as the code interpreter SDK sends it on its
// contexts calls.
std::string PresentedToken(const http::Request& request) {
  std::string token = http::HeaderToken(request, "X-Access-Token");
  if (token.empty()) token = http::HeaderToken(request, "E2B-Traffic-Access-Token");
  return token;
}

// One file going up over warden.v1's UploadFile as its bytes come (from an
// inflater, from a multipart reader): the header first, then chunks of at
// most kChunk. A refusal by the server (the file too large, the workspace
// full) ends it with the server's error at once.
class FileUploader {
 public:
  static constexpr size_t kChunk = kGunzipPiece;  // one piece of the inflater's at a time

  FileUploader(v1::Executor::StubInterface* executor, const std::string& token, const std::string& session_id,
               const std::string& path, const std::map<std::string, std::string>& metadata, int64_t size)
      : ctx_(http::UpstreamContext(token, absl::Minutes(2))), writer_(executor->UploadFile(ctx_.get(), &info_)) {
    v1::UploadFileRequest header;
    header.mutable_header()->set_session_id(session_id);
    header.mutable_header()->set_path(path);
    header.mutable_header()->mutable_metadata()->insert(metadata.begin(), metadata.end());
    header.mutable_header()->set_size(size);
    if (!writer_->Write(header)) Refused();
  }
  FileUploader(const FileUploader&) = delete;
  FileUploader& operator=(const FileUploader&) = delete;
  ~FileUploader() {
    if (!done_) Cancel();
  }

  absl::Status Write(absl::string_view bytes) {
    while (status_.ok() && !bytes.empty()) {
      if (pending_.empty() && bytes.size() >= kChunk) {  // straight from the caller's bytes
        Send(bytes.substr(0, kChunk));
        bytes.remove_prefix(kChunk);
        continue;
      }
      const size_t take = std::min(bytes.size(), kChunk - pending_.size());
      pending_.append(bytes.data(), take);
      bytes.remove_prefix(take);
      if (pending_.size() == kChunk) {
        Send(pending_);
        pending_.clear();
      }
    }
    return status_;
  }
  absl::StatusOr<v1::FileInfo> Finish() {
    if (status_.ok() && !pending_.empty()) Send(pending_);
    if (!status_.ok()) return status_;
    done_ = true;
    writer_->WritesDone();
    RETURN_IF_ERROR(http::FromGrpc(writer_->Finish()));
    return info_;
  }
  // Gives up: the server stops where the file got to.
  void Cancel() {
    if (done_) return;
    done_ = true;
    ctx_->TryCancel();
    (void)writer_->Finish();
  }

 private:
  void Send(absl::string_view data) {
    v1::UploadFileRequest chunk;
    chunk.set_chunk(std::string(data));
    if (!writer_->Write(chunk)) Refused();
  }
  // The stream broke: the server's own status says why.
  void Refused() {
    done_ = true;
    status_ = http::FromGrpc(writer_->Finish());
    if (status_.ok()) status_ = absl::UnavailableError("the upload was cut off; try again");
  }

  std::unique_ptr<grpc::ClientContext> ctx_;
  v1::FileInfo info_;
  std::unique_ptr<grpc::ClientWriterInterface<v1::UploadFileRequest>> writer_;
  std::string pending_;
  absl::Status status_;
  bool done_ = false;
};

class Front {
 public:
  Front(v1::Executor::StubInterface* executor, E2bOptions options)
      : executor_(executor),
        options_(std::move(options)),
        tokens_(options_.access_key.empty() ? AccessTokens::Random() : *AccessTokens::WithKey(options_.access_key)) {}

  // ---- Control plane ----

  absl::Status Create(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(json body, JsonBody(request, /*allow_empty=*/true));
    ASSIGN_OR_RETURN(std::string template_id, Field(body, "templateID", options_.template_id));
    if (absl::StartsWith(template_id, "snap-")) return CreateFromSnapshot(request, exchange, body, template_id);
    // Another template: one imported into Warden (warden template import,
    // docs/templates.md), by its name, as E2B's template ids and aliases.
    // The network (E2B's default: the internet, which the tenant's ceiling
    // narrows; none at all until the operator enables egress, every
    // connection attempt inside then saying so at once).
    ASSIGN_OR_RETURN(bool internet, Field(body, "allow_internet_access", true));
    const json network = body.contains("network") && body["network"].is_object() ? body["network"] : json::object();
    ASSIGN_OR_RETURN(v1::NetworkPolicy policy, NetworkOf(network, internet));
    ASSIGN_OR_RETURN(bool public_traffic, Field(network, "allowPublicTraffic", true));
    ASSIGN_OR_RETURN(std::string mask_host, Field(network, "maskRequestHost", std::string()));
    ASSIGN_OR_RETURN(auto env, EnvVars(body, "envVars"));
    ASSIGN_OR_RETURN(int64_t timeout, Field<int64_t>(body, "timeout", options_.default_timeout_seconds));
    // lifecycle: {onTimeout: 'pause', keepMemory?, autoResume?} arrives as
    // autoPause, autoPauseMemory and autoResume: {enabled}.
    ASSIGN_OR_RETURN(bool auto_pause, Field(body, "autoPause", false));
    ASSIGN_OR_RETURN(bool auto_pause_memory, Field(body, "autoPauseMemory", true));
    v1::CreateSessionRequest create;
    if (auto_pause) {
      create.set_on_expiry(auto_pause_memory ? v1::ON_EXPIRY_PAUSE : v1::ON_EXPIRY_PAUSE_FILESYSTEM);
    }
    create.set_language(v1::LANGUAGE_PYTHON);
    create.set_shared_workspace(true);
    create.set_workspace_path(kHome);
    create.add_workspace_aliases("/workspace");
    create.mutable_env()->insert(env.begin(), env.end());
    if (!IsServedTemplate(template_id)) create.set_template_(template_id);
    ASSIGN_OR_RETURN(std::vector<v1::VolumeMount> mounts, VolumeMounts(body));
    for (v1::VolumeMount& mount : mounts) *create.add_volumes() = std::move(mount);
    create.set_ttl_seconds(timeout);
    create.set_idle_timeout_seconds(timeout);  // E2B has only the TTL
    ASSIGN_OR_RETURN(*create.mutable_labels(), Labels(template_id, body));
    *create.mutable_network() = std::move(policy);
    // Public ports only where the operator allows them; else the traffic
    // token (E2B's allowPublicTraffic: false) or the API key is needed.
    create.mutable_ports()->set_public_(public_traffic && options_.allow_public_ports);
    create.mutable_ports()->set_host_header(mask_host);
    // autoResume: a request to a port of the paused sandbox resumes it too
    // (E2B's proxy), whoever sends it, so the daemon does it (ConnectPort).
    create.mutable_ports()->set_resume_on_request(create.labels().contains(kAutoResumeLabel));
    v1::Session session;
    absl::Status created =
        FromGrpc(executor_->CreateSession(http::UpstreamContext(request.token, kCallTimeout).get(), create, &session));
    // A template that does not exist is a bad request in E2B's spec (which
    // names no 404 for POST /sandboxes).
    if (absl::IsNotFound(created) && !create.template_().empty()) created = absl::InvalidArgumentError(created.message());
    RETURN_IF_ERROR(created);
    return exchange.Send(http::Response::Json(201, Created(session, request, /*contexts_known=*/true)));
  }

  // A snapshot's id as a template (Sandbox.create(snapshotId)): a new
  // sandbox with the snapshot's files and Python state (RestoreSnapshot).
  absl::Status CreateFromSnapshot(http::Request& request, http::Exchange& exchange, const json& body,
                                  const std::string& snapshot_id) {
    ASSIGN_OR_RETURN(int64_t timeout, Field<int64_t>(body, "timeout", options_.default_timeout_seconds));
    v1::RestoreSnapshotRequest restore;
    restore.set_snapshot_id(snapshot_id);
    restore.set_ttl_seconds(timeout);
    ASSIGN_OR_RETURN(*restore.mutable_labels(), Labels(snapshot_id, body));
    v1::Session session;
    RETURN_IF_ERROR(FromGrpc(executor_->RestoreSnapshot(
        http::UpstreamContext(request.token, kCallTimeout).get(), restore, &session)));
    if (!session.shared_workspace()) {
      CloseQuietly(request.token, session.id());
      return absl::InvalidArgumentError(absl::StrCat(
          "snapshot ", snapshot_id, " was not taken from an E2B sandbox: restore it over warden.v1"));
    }
    return exchange.Send(http::Response::Json(201, Created(session, request, /*contexts_known=*/false)));
  }

  // Sandbox.createSnapshot: the sandbox's files and Python state, kept
  // after it ends (SnapshotSession); its name, if any, is E2B's.
  absl::Status CreateSnapshot(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(json body, JsonBody(request, /*allow_empty=*/true));
    ASSIGN_OR_RETURN(std::string name, Field(body, "name", std::string()));
    v1::SnapshotSessionRequest snap;
    snap.set_session_id(request.Param("id"));
    snap.set_name(name);
    v1::Snapshot snapshot;
    RETURN_IF_ERROR(FromGrpc(executor_->SnapshotSession(
        http::UpstreamContext(request.token, kCallTimeout).get(), snap, &snapshot)));
    return exchange.Send(http::Response::Json(201, SnapshotJson(snapshot)));
  }

  // GET /snapshots?sandboxID=&name=&limit=&nextToken=: the caller's
  // snapshots, newest first, a page at a time (X-Next-Token), as E2B's API.
  absl::Status ListSnapshots(http::Request& request, http::Exchange& exchange) {
    v1::ListSnapshotsResponse snapshots;
    RETURN_IF_ERROR(FromGrpc(executor_->ListSnapshots(http::UpstreamContext(request.token, kCallTimeout).get(),
                                                      v1::ListSnapshotsRequest(), &snapshots)));
    ASSIGN_OR_RETURN(PageQuery page_query, ParsePageQuery(request));
    const std::string sandbox = request.Query("sandboxID"), name = request.Query("name");
    std::vector<const v1::Snapshot*> matching;
    std::vector<std::pair<absl::Time, std::string>> keys;
    for (const v1::Snapshot& s : snapshots.snapshots()) {
      if ((!sandbox.empty() && s.session_id() != sandbox) || (!name.empty() && s.name() != name)) continue;
      matching.push_back(&s);
      keys.emplace_back(absl::FromUnixMillis(s.created_unix_ms()), s.snapshot_id());
    }
    const SandboxPage page = PageOf(page_query, keys);
    json out = json::array();
    for (size_t i : page.items) out.push_back(SnapshotJson(*matching[i]));
    http::Response response = http::Response::Json(200, out);
    if (!page.next_token.empty()) response.With("X-Next-Token", page.next_token);
    return exchange.Send(response);
  }

  // Sandbox.deleteSnapshot calls DELETE /templates/{id}: a snapshot is a
  // template in E2B.
  absl::Status DeleteSnapshot(http::Request& request, http::Exchange& exchange) {
    v1::DeleteSnapshotRequest del;
    del.set_snapshot_id(request.Param("id"));
    v1::DeleteSnapshotResponse deleted;
    RETURN_IF_ERROR(FromGrpc(executor_->DeleteSnapshot(http::UpstreamContext(request.token, kCallTimeout).get(),
                                                       del, &deleted)));
    return exchange.Send(NoContent());
  }

  // Sandbox.fork: `count` new sandboxes, each with the source's files and
  // Python state (ForkSession); the source keeps running. One that fails
  // is reported in its place, as E2B does.
  absl::Status Fork(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(json body, JsonBody(request, /*allow_empty=*/true));
    ASSIGN_OR_RETURN(int64_t count, Field<int64_t>(body, "count", 1));
    // The spec's default lifetime of a fork is 15 s (SandboxForkRequest).
    ASSIGN_OR_RETURN(int64_t timeout, Field<int64_t>(body, "timeout", kForkDefaultTimeoutSeconds));
    if (count < 1 || count > 16) return absl::InvalidArgumentError("count must be 1 to 16");
    ASSIGN_OR_RETURN(v1::Session source, Session(request));
    json out = json::array();
    for (int64_t i = 0; i < count; ++i) {
      v1::ForkSessionRequest fork;  // no labels: the source's
      fork.set_session_id(source.id());
      v1::ForkSessionResponse forked;
      grpc::Status s = executor_->ForkSession(http::UpstreamContext(request.token, kCallTimeout).get(), fork, &forked);
      v1::Session session = forked.session();
      if (s.ok()) {
        v1::SetSessionTtlRequest ttl;
        ttl.set_session_id(session.id());
        ttl.set_ttl_seconds(timeout);
        s = executor_->SetSessionTtl(http::UpstreamContext(request.token, kCallTimeout).get(), ttl, &session);
      }
      if (!s.ok()) {
        absl::Status error = http::FromGrpc(s);
        out.push_back({{"error", {{"code", http::HttpStatusFor(error.code())}, {"message", std::string(error.message())}}}});
        continue;
      }
      // The fork carries the source's labels, its E2B template and metadata with them.
      json created = Created(session, request, /*contexts_known=*/false);
      out.push_back({{"sandbox", created}});
    }
    // 201 as E2B's spec has it: the forks were attempted, each entry says how it went.
    return exchange.Send(http::Response::Json(201, out));
  }

  // GET /v2/sandboxes with E2B's whole query (sandbox_list.h), and the
  // deprecated GET /sandboxes (running ones, metadata only, one page).
  absl::Status List(http::Request& request, http::Exchange& exchange) {
    const bool v2 = absl::StartsWith(request.path, "/v2/");
    ASSIGN_OR_RETURN(SandboxQuery query, ParseSandboxQuery(request, v2));
    v1::ListSessionsRequest list;
    (*list.mutable_labels())[kTemplateLabel] = options_.template_id;
    v1::ListSessionsResponse sessions;
    RETURN_IF_ERROR(FromGrpc(executor_->ListSessions(http::UpstreamContext(request.token, kCallTimeout).get(), list,
                                                 &sessions)));
    std::vector<ListedSandbox> listed;
    for (const v1::Session& s : sessions.sessions()) {
      const SandboxInfo info = InfoOf(s, options_.template_id);
      ListedSandbox sandbox{s.id(), absl::FromUnixMillis(s.created_unix_ms()),
                            s.state() == v1::SESSION_STATE_PAUSED, {info.template_id}, {}};
      if (IsServedTemplate(info.template_id)) sandbox.template_names = ServedTemplateNames();
      for (const auto& [key, value] : info.metadata.items()) {
        if (value.is_string()) sandbox.metadata[key] = value.get<std::string>();
      }
      listed.push_back(std::move(sandbox));
    }
    const SandboxPage page = SelectSandboxes(query, listed);
    json out = json::array();
    for (size_t i : page.items) out.push_back(SandboxJson(sessions.sessions(static_cast<int>(i)), options_));
    http::Response response = http::Response::Json(200, out);
    if (v2 && query.running) response.With("X-Total-Running", std::to_string(page.total_running));
    if (!page.next_token.empty()) response.With("X-Next-Token", page.next_token);
    return exchange.Send(response);
  }

  absl::Status Get(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(v1::Session session, Session(request));
    return exchange.Send(
        http::Response::Json(200, SandboxJson(session, options_)));
  }

  absl::Status Kill(http::Request& request, http::Exchange& exchange) {
    v1::CloseSessionRequest close;
    close.set_session_id(request.Param("id"));
    v1::CloseSessionResponse closed;
    RETURN_IF_ERROR(FromGrpc(
        executor_->CloseSession(http::UpstreamContext(request.token, kCallTimeout).get(), close, &closed)));
    sandboxes_.Remove(request.Param("id"));
    return exchange.Send(NoContent());
  }

  // PUT /sandboxes/{id}/network: updateNetwork, replacing the egress rules
  // whole (a field left out is cleared).
  absl::Status UpdateNetwork(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(json body, JsonBody(request, /*allow_empty=*/true));
    ASSIGN_OR_RETURN(bool internet, Field(body, "allow_internet_access", true));
    v1::UpdateNetworkRequest update;
    update.set_session_id(request.Param("id"));
    ASSIGN_OR_RETURN(*update.mutable_network(), NetworkOf(body, internet));
    v1::Session session;
    RETURN_IF_ERROR(FromGrpc(executor_->UpdateNetwork(http::UpstreamContext(request.token, kCallTimeout).get(),
                                                      update, &session)));
    return exchange.Send(NoContent());
  }

  // An exposed port's E2B traffic token: the API key it carries, if it is
  // sandbox `id`'s access token.
  std::optional<std::string> OpenTrafficToken(const std::string& id, const std::string& token) const {
    absl::StatusOr<std::string> key = tokens_.Open(token, id);
    if (!key.ok()) return std::nullopt;
    return *std::move(key);
  }

  absl::Status SetTimeout(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(json body, JsonBody(request, /*allow_empty=*/false));
    if (!body.contains("timeout") || !body["timeout"].is_number_integer()) {
      return absl::InvalidArgumentError("give the new timeout in seconds: {\"timeout\": 300}");
    }
    // 0 (or less, as E2B reads it) ends the sandbox's life now: it is
    // killed, or paused with lifecycle onTimeout 'pause', within a second.
    ASSIGN_OR_RETURN(v1::Session session, Extend(request, std::max<int64_t>(0, body["timeout"].get<int64_t>())));
    return exchange.Send(NoContent());
  }

  // POST /sandboxes/{id}/pause {memory}: E2B's pause (PauseSession): with
  // memory, every process is frozen where it is; without, the processes end
  // and the files stay (a cold boot on resume). 409 if already paused.
  absl::Status Pause(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(json body, JsonBody(request, /*allow_empty=*/true));
    ASSIGN_OR_RETURN(bool memory, Field(body, "memory", true));
    v1::PauseSessionRequest pause;
    pause.set_session_id(request.Param("id"));
    pause.set_keep_memory(memory);
    v1::Session session;
    absl::Status paused = FromGrpc(
        executor_->PauseSession(http::UpstreamContext(request.token, kCallTimeout).get(), pause, &session));
    if (absl::IsAlreadyExists(paused)) return absl::Status(absl::StatusCode::kAborted, paused.message());
    RETURN_IF_ERROR(paused);
    return exchange.Send(NoContent());
  }

  absl::Status Connect(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(json body, JsonBody(request, /*allow_empty=*/true));
    ASSIGN_OR_RETURN(int64_t timeout, Field<int64_t>(body, "timeout", options_.default_timeout_seconds));
    // A paused sandbox is resumed by connecting to it.
    ASSIGN_OR_RETURN(bool resumed, Resume(request.token, request.Param("id")));
    const bool is_resume = absl::EndsWith(request.path, "/resume");
    if (is_resume && !resumed) {  // E2B's resume is for a paused sandbox only
      return absl::AbortedError(absl::StrCat("Sandbox ", request.Param("id"), " is already running"));
    }
    // Connecting extends a sandbox's life, never shortens it (as E2B does).
    ASSIGN_OR_RETURN(v1::Session session, Session(request));
    if (absl::FromUnixMillis(session.expires_unix_ms()) < absl::Now() + absl::Seconds(timeout)) {
      ASSIGN_OR_RETURN(session, Extend(request, timeout));
    }
    // A token of its own for this key (another key of the tenant, or a
    // sandbox made elsewhere): the sandbox plane then calls with this key.
    // 201 when it was resumed, 200 when it was running, as E2B's spec has it.
    return exchange.Send(http::Response::Json(resumed ? 201 : 200, Created(session, request, /*contexts_known=*/false)));
  }

  // One sample of what the sandbox uses now, in E2B's SandboxMetric shape,
  // when it falls in [start, end] (unix seconds, which the SDKs round to the
  // nearest, so `start` is taken to reach half a second back; E2B's samples
  // are 5 s buckets, so `end` is taken to reach to the end of its bucket). Warden
  // keeps no history: each call samples anew. CPU use is the share of its
  // cores the sandbox used since the previous call (or since it started).
  absl::Status Metrics(http::Request& request, http::Exchange& exchange) {
    int64_t start = 0, end = INT64_MAX;
    if (!request.Query("start").empty() && !absl::SimpleAtoi(request.Query("start"), &start)) {
      return absl::InvalidArgumentError("start must be unix seconds");
    }
    if (!request.Query("end").empty() && !absl::SimpleAtoi(request.Query("end"), &end)) {
      return absl::InvalidArgumentError("end must be unix seconds");
    }
    ASSIGN_OR_RETURN(v1::Session session, Session(request));
    const absl::Time now = absl::Now();
    const int64_t second = absl::ToUnixSeconds(now);
    json out = json::array();
    if (start > (absl::ToUnixMillis(now) + 500) / 1000 || (end != INT64_MAX && second > end + 5)) {
      return exchange.Send(http::Response::Json(200, out));
    }
    out.push_back(Sample(session, now));
    return exchange.Send(http::Response::Json(200, out));
  }

  // GET /sandboxes/metrics?sandbox_ids=a,b: each one's sample of now, by
  // id; ids of no sandbox of the caller's are left out, as E2B does.
  absl::Status MetricsOfMany(http::Request& request, http::Exchange& exchange) {
    const std::string ids = request.Query("sandbox_ids");
    if (ids.empty()) return absl::InvalidArgumentError("name the sandboxes: sandbox_ids=ID1,ID2 (at most 100)");
    std::vector<std::string> wanted = absl::StrSplit(ids, ',', absl::SkipEmpty());
    if (wanted.size() > 100) return absl::InvalidArgumentError("at most 100 sandbox_ids at a time");
    json out = json::object();
    for (const std::string& id : wanted) {
      v1::GetSessionRequest get;
      get.set_session_id(id);
      v1::Session session;
      const grpc::Status s = executor_->GetSession(http::UpstreamContext(request.token, kCallTimeout).get(), get, &session);
      if (s.error_code() == grpc::StatusCode::NOT_FOUND || s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
        continue;
      }
      RETURN_IF_ERROR(FromGrpc(s));
      out[id] = Sample(session, absl::Now());
    }
    return exchange.Send(http::Response::Json(200, {{"sandboxes", out}}));
  }

  // GET /sandboxes/{id}/logs and /v2/sandboxes/{id}/logs: Warden keeps no
  // log of a sandbox's own (E2B's are its envd's start-up and process
  // lines; a command's output is the command's), so the list is empty, for
  // a sandbox of the caller's.
  absl::Status Logs(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(v1::Session session, Session(request));
    json out = {{"logs", json::array()}};
    if (!absl::StartsWith(request.path, "/v2/")) out["logEntries"] = json::array();
    return exchange.Send(http::Response::Json(200, out));
  }

  // envd's /health: 204 while the sandbox runs; 502, as E2B's proxy
  // answers, when it is paused or gone (the SDK's isRunning() is false).
  // Like every route of the plane, only for the sandbox's access token.
  absl::Status Health(http::Request& request, http::Exchange& exchange) {
    http::Response r;
    r.status = 204;
    r.content_type.clear();
    auto sandbox = Sandbox(request);
    v1::Session session;
    grpc::Status s = grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown sandbox");
    if (sandbox.ok()) {
      v1::GetSessionRequest get;
      get.set_session_id(sandbox->id);
      s = executor_->GetSession(http::UpstreamContext(sandbox->api_key, kCallTimeout).get(), get, &session);
    }
    if (!s.ok() || session.state() == v1::SESSION_STATE_PAUSED) {
      return exchange.Send(http::Response::Json(
          502, {{"code", 502},
                {"sandboxId", request.Header("E2b-Sandbox-Id")},
                {"message", s.ok() ? "The sandbox was not found: it is paused"
                                   : "The sandbox was not found: it is not running"}}));
    }
    return exchange.Send(r);
  }

  absl::Status Refresh(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(v1::Session session, Session(request));
    return exchange.Send(NoContent());
  }

  // ---- Sandbox plane ----

  absl::Status Execute(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(auto sandbox, Sandbox(request));
    ASSIGN_OR_RETURN(json body, JsonBody(request, /*allow_empty=*/false));
    if (!body.contains("code") || !body["code"].is_string()) {
      return absl::InvalidArgumentError("the body needs \"code\": the code to run, as a string");
    }
    ASSIGN_OR_RETURN(auto env, EnvVars(body, "env_vars"));
    v1::ExecuteRequest execute;
    execute.mutable_env()->insert(env.begin(), env.end());
    execute.set_session_id(sandbox.id);
    execute.set_code(body["code"].get<std::string>());
    ASSIGN_OR_RETURN(std::string context_id, Field(body, "context_id", std::string()));
    const json language_name = body.contains("language") ? body["language"] : json();
    if (!context_id.empty()) {
      if (!language_name.is_null()) return absl::InvalidArgumentError("give context_id or language, not both");
      execute.set_context_id(context_id);
    } else {
      ASSIGN_OR_RETURN(v1::Language language, LanguageOf(language_name));
      ASSIGN_OR_RETURN(std::string context, DefaultContext(sandbox, language));
      execute.set_context_id(context);
    }

    // The response starts as soon as the cell is accepted, as E2B's server
    // starts it: the SDK's timeout and kill() then govern a silent cell.
    auto ctx = http::UpstreamContext(sandbox.api_key);
    auto reader = executor_->ExecuteStream(ctx.get(), execute);
    reader->WaitForInitialMetadata();
    if (ctx->GetServerInitialMetadata().count(kCellAcceptedMetadataKey) == 0) {
      v1::ExecuteEvent ignored;
      while (reader->Read(&ignored)) {
      }
      return http::FromGrpc(reader->Finish());  // refused: a plain error
    }
    ASSIGN_OR_RETURN(auto stream, exchange.StartStream(200, "application/x-ndjson"));
    StreamEvents<v1::ExecuteEvent> events(std::move(ctx), std::move(reader));
    // A client that goes away is noticed when its connection closes, and its
    // cell is interrupted (the call is cancelled); a quiet cell gets a
    // keepalive line now and then, as from E2B's server.
    auto hangup = http::Hangup::Subscribe(stream->hangup(), [&events] { events.Cancel(); });
    v1::ExecuteEvent event;
    for (;;) {
      const auto next = events.Wait(absl::Now() + options_.keepalive, &event);
      if (next == StreamEvents<v1::ExecuteEvent>::Next::kEnd) break;
      bool written = true;
      if (next == StreamEvents<v1::ExecuteEvent>::Next::kQuiet) {
        written = stream->Write(Line({{"type", "keepalive"}})).ok();
      } else if (event.has_summary() && event.summary().outcome() != v1::OUTCOME_OK &&
                 event.summary().outcome() != v1::OUTCOME_ERROR && !SessionExists(sandbox)) {
        // The sandbox was killed under the cell: the connection drops, as
        // from E2B's killed sandbox, and the SDK reports it so.
        stream->Abort();
        return absl::OkStatus();
      } else {
        for (const json& line : ExecutionLines(event, absl::Now())) {
          written = written && stream->Write(Line(line)).ok();
        }
      }
      if (!written) {
        events.Cancel();  // interrupts the cell
        return absl::OkStatus();
      }
    }
    grpc::Status status = events.status();
    if (!status.ok()) {
      (void)stream->Write(Line({{"type", "error"}, {"name", "WardenError"}, {"value", status.error_message()},
                                {"traceback", ""}}));
      (void)stream->Write(Line({{"type", "end_of_execution"}}));
    }
    return stream->Finish();
  }

  absl::Status CreateContext(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(auto sandbox, Sandbox(request));
    ASSIGN_OR_RETURN(json body, JsonBody(request, /*allow_empty=*/true));
    ASSIGN_OR_RETURN(v1::Language language, LanguageOf(body.contains("language") ? body["language"] : json()));
    ASSIGN_OR_RETURN(std::string asked_cwd, Field(body, "cwd", std::string()));
    ASSIGN_OR_RETURN(std::string cwd, ResolveHome(asked_cwd));  // a relative one from the home
    v1::CreateContextRequest create;
    create.set_session_id(sandbox.id);
    create.set_language(language);
    create.set_cwd(cwd == kHome ? std::string() : cwd);
    v1::Context context;
    RETURN_IF_ERROR(FromGrpc(executor_->CreateContext(
        http::UpstreamContext(sandbox.api_key, kCallTimeout).get(), create, &context)));
    return exchange.Send(http::Response::Json(200, ContextJson(context)));
  }

  absl::Status ListContexts(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(auto sandbox, Sandbox(request));
    // E2B's sandboxes start with a Python and a JavaScript context; Warden
    // starts the JavaScript one when it is first used or listed, and lists
    // the default contexts first, as E2B does.
    ASSIGN_OR_RETURN(std::string javascript, DefaultContext(sandbox, v1::LANGUAGE_JAVASCRIPT));
    v1::ListContextsRequest list;
    list.set_session_id(sandbox.id);
    v1::ListContextsResponse contexts;
    RETURN_IF_ERROR(FromGrpc(executor_->ListContexts(
        http::UpstreamContext(sandbox.api_key, kCallTimeout).get(), list, &contexts)));
    std::set<std::string> defaults = {sandbox.id, javascript};
    {
      absl::MutexLock lock(&sandbox.record->mu);
      for (const auto& [language, id] : sandbox.record->default_contexts) defaults.insert(id);
    }
    json out = json::array();
    for (bool first : {true, false}) {
      for (const v1::Context& c : contexts.contexts()) {
        if ((defaults.count(c.id()) != 0) == first) out.push_back(ContextJson(c));
      }
    }
    return exchange.Send(http::Response::Json(200, out));
  }

  absl::Status RestartContext(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(auto sandbox, Sandbox(request));
    v1::RestartContextRequest restart;
    restart.set_session_id(sandbox.id);
    restart.set_context_id(request.Param("context"));
    v1::Context context;
    RETURN_IF_ERROR(FromGrpc(executor_->RestartContext(
        http::UpstreamContext(sandbox.api_key, kCallTimeout).get(), restart, &context)));
    return exchange.Send(NoContent());
  }

  absl::Status RemoveContext(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(auto sandbox, Sandbox(request));
    v1::RemoveContextRequest remove;
    remove.set_session_id(sandbox.id);
    remove.set_context_id(request.Param("context"));
    v1::RemoveContextResponse removed;
    RETURN_IF_ERROR(FromGrpc(executor_->RemoveContext(
        http::UpstreamContext(sandbox.api_key, kCallTimeout).get(), remove, &removed)));
    {
      absl::MutexLock lock(&sandbox.record->mu);
      for (auto it = sandbox.record->default_contexts.begin(); it != sandbox.record->default_contexts.end();) {
        it = it->second == remove.context_id() ? sandbox.record->default_contexts.erase(it) : std::next(it);
      }
    }
    return exchange.Send(NoContent());
  }

  absl::Status ReadFile(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(auto sandbox, FileSandbox(request, "read"));
    ASSIGN_OR_RETURN(std::string path, WorkspacePath(request.Query("path"), kPathHint));
    v1::DownloadFileRequest download;
    download.set_session_id(sandbox.id);
    download.set_path(path);
    auto ctx = http::UpstreamContext(sandbox.api_key, kCallTimeout);
    auto reader = executor_->DownloadFile(ctx.get(), download);
    std::string data;
    v1::FileChunk chunk;
    while (reader->Read(&chunk)) data += chunk.data();
    RETURN_IF_ERROR(FromGrpc(reader->Finish()));
    http::Response response;
    response.content_type = "application/octet-stream";
    response.body = std::move(data);
    return exchange.Send(response);
  }

  absl::Status WriteFile(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(auto sandbox, FileSandbox(request, "write"));
    // Metadata comes as X-Metadata-<key> headers (header names are
    // case-insensitive: keys come out lower case, as E2B's envd has them).
    std::map<std::string, std::string> metadata;
    for (const auto& field : request.raw) {
      const std::string name = absl::AsciiStrToLower(std::string(field.name_string()));
      if (absl::StartsWith(name, "x-metadata-") && name.size() > 11) {
        metadata[name.substr(11)] = std::string(field.value());
      }
    }
    const std::string encoding = absl::AsciiStrToLower(request.Header("Content-Encoding"));
    const bool gzip = !encoding.empty() && encoding != "identity";
    if (gzip && encoding != "gzip") {
      return absl::InvalidArgumentError(absl::StrCat(
          "Content-Encoding '", encoding, "' is not supported: send the file as is, or gzip'ed"));
    }
    // Every byte goes on to UploadFile as it comes out of the inflater (a
    // gzip'ed body) and the multipart reader: no file, inflated or not, is
    // ever held whole here, and an upload costs this front the body the
    // client sent and one piece of each.
    json out = json::array();
    std::optional<FileUploader> upload;
    auto finish_file = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(v1::FileInfo info, upload->Finish());
      upload.reset();
      const std::string shown = HomePath(info.path());
      json entry = {{"name", shown.substr(shown.rfind('/') + 1)}, {"path", shown}, {"type", "file"}};
      if (!info.metadata().empty()) {
        entry["metadata"] = json(std::map<std::string, std::string>(info.metadata().begin(), info.metadata().end()));
      }
      out.push_back(std::move(entry));
      return absl::OkStatus();
    };
    std::function<absl::Status(absl::string_view)> feed;
    std::unique_ptr<MultipartReader> reader;
    const std::string content_type = request.Header("Content-Type");
    const bool raw = absl::StartsWithIgnoreCase(content_type, "application/octet-stream");
    if (raw) {
      ASSIGN_OR_RETURN(std::string path, WorkspacePath(request.Query("path"), kPathHint));
      upload.emplace(executor_, sandbox.api_key, sandbox.id, path, metadata,
                     gzip ? 0 : static_cast<int64_t>(request.body().size()));
      feed = [&upload](absl::string_view piece) { return upload->Write(piece); };
    } else {
      ASSIGN_OR_RETURN(std::string boundary, MultipartBoundary(content_type));
      MultipartReader::Sink sink;
      sink.begin = [&](const FormPart& head) -> absl::Status {
        if (head.name != "file") return absl::OkStatus();
        const std::string asked = !request.Query("path").empty() ? request.Query("path") : head.filename;
        ASSIGN_OR_RETURN(std::string path, WorkspacePath(asked, kPathHint));
        upload.emplace(executor_, sandbox.api_key, sandbox.id, path, metadata, 0);
        return absl::OkStatus();
      };
      sink.data = [&upload](absl::string_view piece) { return upload ? upload->Write(piece) : absl::OkStatus(); };
      sink.end = [&]() { return upload ? finish_file() : absl::OkStatus(); };
      reader = std::make_unique<MultipartReader>(boundary, std::move(sink));
      feed = [&reader](absl::string_view piece) { return reader->Feed(piece); };
    }
    absl::Status fed =
        !gzip ? feed(request.body())
              : raw ? GunzipTo(request.body(), static_cast<size_t>(options_.max_file_bytes),
                               "the most one file may hold", feed)
                    : GunzipTo(request.body(), options_.max_body_bytes, "the most one upload may hold", feed);
    if (fed.ok() && reader) fed = reader->Finish();
    if (fed.ok() && raw) fed = finish_file();
    if (!fed.ok()) {
      if (upload) upload->Cancel();
      return fed;
    }
    if (out.empty()) return absl::InvalidArgumentError("the upload holds no \"file\" field");
    return exchange.Send(http::Response::Json(200, out));
  }

  struct SandboxRef {
    std::string id;
    std::string api_key;  // the X-API-KEY its access token carries: what the front calls warden.v1 with
    std::string tenant;   // that key's tenant
    std::shared_ptr<Record> record;
  };

  // The sandbox a sandbox-plane request names, once its access token is
  // checked: X-Access-Token, or E2B-Traffic-Access-Token (which the code
  // interpreter SDK sends on its contexts calls instead), opened
  // (access_token.h) for the sandbox the E2b-Sandbox-Id header names. A
  // missing or wrong token and an unknown sandbox get the same refusal, so
  // that it tells nothing about which sandboxes exist. Nothing of it is
  // kept but a cache: a front started after the token was made opens it.
  absl::StatusOr<SandboxRef> Known(const http::Request& request) {
    const std::string id = request.Header("E2b-Sandbox-Id");
    if (id.empty()) {
      return absl::InvalidArgumentError(
          "name the sandbox in the E2b-Sandbox-Id header (set E2B_SANDBOX_URL to this server)");
    }
    const std::string presented = PresentedToken(request);
    absl::StatusOr<std::string> api_key =
        presented.empty() ? absl::NotFoundError("no token") : tokens_.Open(presented, id);
    if (!api_key.ok()) {
      return absl::NotFoundError(absl::StrCat(
          "sandbox ", id, " is not known here with this access token: create it, or connect to it, "
          "through this server (or a front sharing its http.e2b_key_file) first, and send its envdAccessToken "
          "as X-Access-Token"));
    }
    return Opened(id, *std::move(api_key), presented);
  }

  // A sandbox whose access token opened to `api_key`: the key must still be
  // valid (a revoked key revokes its tokens), and the sandbox is looked up
  // with it when this front has not seen it yet.
  absl::StatusOr<SandboxRef> Opened(const std::string& id, std::string api_key, const std::string& access_token) {
    absl::StatusOr<std::string> tenant = options_.authenticate ? options_.authenticate(api_key) : std::string();
    if (!tenant.ok()) {
      return absl::UnauthenticatedError(absl::StrCat(
          "the API key sandbox ", id, "'s access token was made for is no longer accepted: connect to the "
          "sandbox with a valid key for a new access token"));
    }
    std::shared_ptr<Record> record = sandboxes_.Get(id);
    if (!record || record->Ended(absl::Now())) {
      // Not seen yet, or its time is up (it may have been extended since):
      // asked again.
      v1::GetSessionRequest get;
      get.set_session_id(id);
      v1::Session session;
      const grpc::Status got = executor_->GetSession(http::UpstreamContext(api_key, kCallTimeout).get(), get, &session);
      // The token is the sandbox's own (it opened), so saying that the
      // sandbox ended tells its holder nothing it may not know.
      if (got.error_code() == grpc::StatusCode::NOT_FOUND) {
        sandboxes_.Remove(id);
        return SandboxNotRunning(id);
      }
      RETURN_IF_ERROR(FromGrpc(got));
      record = sandboxes_.GetOrAdd(session, options_.template_id);
    }
    sandboxes_.Remember(id, access_token);
    return SandboxRef{id, std::move(api_key), *std::move(tenant), std::move(record)};
  }

  // Known, resumed first when it was paused with autoResume.
  absl::StatusOr<SandboxRef> Sandbox(const http::Request& request) {
    ASSIGN_OR_RETURN(SandboxRef sandbox, Known(request));
    if (sandbox.record->info.auto_resume) RETURN_IF_ERROR(Resume(sandbox.api_key, sandbox.id).status());
    return sandbox;
  }

  // The tenant a sandbox-plane request counts as on the handler threads,
  // found without a warden.v1 call (on an I/O thread): its access token's
  // API key's; "" when it has none that opens (a signed URL, or a refusal
  // to come).
  std::string TenantOf(const http::Request& request) const {
    const std::string id = request.Header("E2b-Sandbox-Id");
    const std::string presented = PresentedToken(request);
    if (id.empty() || presented.empty() || !options_.authenticate) return "";
    absl::StatusOr<std::string> api_key = tokens_.Open(presented, id);
    if (!api_key.ok()) return "";
    absl::StatusOr<std::string> tenant = options_.authenticate(*api_key);
    return tenant.ok() ? *tenant : "";
  }

  // Whether a sandbox-plane request may reach its sandbox: its access
  // token (Known), or for /files a URL that token signed (FileSandbox).
  // The sandbox owner's tenant, as whom the request counts (its streams).
  // Every sandbox-plane and envd route checks this before its handler
  // (AddE2bRoutes, AddEnvdRoutes), so a route added later cannot forget it.
  absl::StatusOr<std::string> CheckAccess(const http::Request& request) {
    absl::StatusOr<SandboxRef> sandbox =
        request.path == "/files" && !request.Query("signature").empty() && PresentedToken(request).empty()
            ? FileSandbox(request, request.method() == "GET" ? "read" : "write")
            : Known(request);
    if (!sandbox.ok()) return sandbox.status();
    return sandbox->tenant;
  }

  // The sandbox of a /files request: named by the E2b-Sandbox-Id header
  // with its access token, or, for a signed URL (downloadUrl, uploadUrl),
  // found by the token that signed it: such a URL carries neither, so it is
  // checked against the tokens this front has seen (Record::Remember).
  absl::StatusOr<SandboxRef> FileSandbox(const http::Request& request, const char* operation) {
    if (request.Query("signature").empty() || !PresentedToken(request).empty()) return Sandbox(request);
    SignedUrl url{request.Query("path"), operation, request.Query("username"), request.Query("signature"),
                  std::nullopt};
    if (const std::string expiration = request.Query("signature_expiration"); !expiration.empty()) {
      int64_t seconds = 0;
      if (!absl::SimpleAtoi(expiration, &seconds)) {
        return absl::InvalidArgumentError("signature_expiration must be unix seconds");
      }
      url.expiration = seconds;
    }
    // What the URL says of itself first, before any signature is computed.
    const absl::Time now = absl::Now();
    RETURN_IF_ERROR(CheckExpiration(url, now));
    if (url.expiration && absl::FromUnixSeconds(*url.expiration) > now + options_.max_signed_url) {
      return absl::UnauthenticatedError(absl::StrCat(
          "the signature expires in ", absl::FormatDuration(absl::FromUnixSeconds(*url.expiration) - now),
          "; this server takes signed URLs that expire within ",
          absl::FormatDuration(options_.max_signed_url),
          " (http.e2b_signed_url_max_seconds): ask for a shorter useSignatureExpiration"));
    }
    const std::string named = request.Header("E2b-Sandbox-Id");
    auto signer = sandboxes_.SignedBy(url, named);
    if (!signer) {
      return absl::UnauthenticatedError(
          "invalid signature, or a URL of a sandbox this server has not seen since it started: a signed URL "
          "works once its sandbox has made any call through this server (e.g. files.list)");
    }
    ASSIGN_OR_RETURN(std::string api_key, tokens_.Open(signer->second, signer->first));
    return Opened(signer->first, std::move(api_key), signer->second);
  }

 private:

  bool SessionExists(const SandboxRef& sandbox) {
    v1::GetSessionRequest get;
    get.set_session_id(sandbox.id);
    v1::Session session;
    return executor_->GetSession(http::UpstreamContext(sandbox.api_key, kCallTimeout).get(), get, &session)
               .error_code() != grpc::StatusCode::NOT_FOUND;
  }

  // ResumeSession when the session is paused: true; false when it was
  // running.
  absl::StatusOr<bool> Resume(const std::string& token, const std::string& id) {
    v1::ResumeSessionRequest resume;
    resume.set_session_id(id);
    v1::Session session;
    absl::Status resumed =
        FromGrpc(executor_->ResumeSession(http::UpstreamContext(token, kCallTimeout).get(), resume, &session));
    if (absl::IsFailedPrecondition(resumed)) return false;
    RETURN_IF_ERROR(resumed);
    return true;
  }

  // volumeMounts: [{name, path}], the volumes (by name) mounted at paths.
  static absl::StatusOr<std::vector<v1::VolumeMount>> VolumeMounts(const json& body) {
    std::vector<v1::VolumeMount> out;
    auto it = body.find("volumeMounts");
    if (it == body.end() || it->is_null()) return out;
    if (!it->is_array()) return absl::InvalidArgumentError("volumeMounts must be a list of {name, path}");
    for (const json& m : *it) {
      if (!m.is_object() || !m.contains("name") || !m["name"].is_string() || !m.contains("path") ||
          !m["path"].is_string()) {
        return absl::InvalidArgumentError("each of volumeMounts is {\"name\": volume, \"path\": where}");
      }
      v1::VolumeMount mount;
      mount.set_volume(m["name"].get<std::string>());
      mount.set_path(m["path"].get<std::string>());
      out.push_back(std::move(mount));
    }
    return out;
  }

  // The labels that carry what the front must know of a sandbox (InfoOf),
  // from a create or restore request's body.
  absl::StatusOr<google::protobuf::Map<std::string, std::string>> Labels(const std::string& template_id,
                                                                        const json& body) const {
    google::protobuf::Map<std::string, std::string> labels;
    labels[kTemplateLabel] = options_.template_id;
    if (template_id != options_.template_id) labels[kTemplateIdLabel] = template_id;
    if (body.contains("metadata") && body["metadata"].is_object() && !body["metadata"].empty()) {
      std::string metadata = body["metadata"].dump();
      if (metadata.size() > kMaxLabelValue) {
        return absl::InvalidArgumentError(absl::StrCat("the sandbox's metadata is ", metadata.size(),
                                                       " bytes as JSON; Warden keeps at most ", kMaxLabelValue,
                                                       ": give fewer or shorter entries"));
      }
      labels[kMetadataLabel] = std::move(metadata);
    }
    if (body.contains("autoResume") && body["autoResume"].is_object()) {
      ASSIGN_OR_RETURN(bool auto_resume, Field(body["autoResume"], "enabled", false));
      if (auto_resume) labels[kAutoResumeLabel] = "true";
    }
    return labels;
  }

  void CloseQuietly(const std::string& token, const std::string& id) {
    v1::CloseSessionRequest close;
    close.set_session_id(id);
    v1::CloseSessionResponse closed;
    (void)executor_->CloseSession(http::UpstreamContext(token, kCallTimeout).get(), close, &closed);
  }

  // One SandboxMetric of `session` at `now`. CPU use is the share of the
  // host's cores it used since the previous sample (or since it started).
  json Sample(const v1::Session& session, absl::Time now) {
    const int64_t second = absl::ToUnixSeconds(now);
    const int cpus = std::max(1u, std::thread::hardware_concurrency());
    double used_pct = 0;
    {
      // A cache: a front that has not sampled it before (it just started)
      // averages since the sandbox started.
      std::shared_ptr<Record> record = sandboxes_.GetOrAdd(session, options_.template_id);
      absl::Time since = absl::FromUnixMillis(session.created_unix_ms());
      int64_t cpu_before = 0;
      {
        absl::MutexLock lock(&record->mu);
        if (record->last_sample) std::tie(since, cpu_before) = *record->last_sample;
        record->last_sample = std::make_pair(now, session.cpu_used_ns());
      }
      const double wall_ns = absl::ToDoubleNanoseconds(now - since);
      if (wall_ns > 0) used_pct = 100.0 * static_cast<double>(session.cpu_used_ns() - cpu_before) / (wall_ns * cpus);
    }
    const int64_t memory_limit = session.limits().memory_mb() << 20;
    return {{"timestamp", Rfc3339(second * 1000)},
            {"timestampUnix", second},
            {"cpuCount", cpus},
            {"cpuUsedPct", std::clamp(used_pct, 0.0, 100.0)},
            {"memUsed", session.memory_current_bytes() != 0 ? session.memory_current_bytes() : session.memory_bytes()},
            {"memTotal", memory_limit},
            {"memCache", 0},
            {"diskUsed", session.workspace_used_bytes()},
            {"diskTotal", session.workspace_limit_bytes()}};
  }

  static json SnapshotJson(const v1::Snapshot& snapshot) {
    json names = json::array();
    if (!snapshot.name().empty()) names.push_back(snapshot.name());
    return {{"snapshotID", snapshot.snapshot_id()}, {"names", names}};
  }

  static http::Response NoContent() {
    http::Response r;
    r.status = 204;
    r.content_type.clear();
    return r;
  }

  // The names the one template Warden serves answers to.
  std::vector<std::string> ServedTemplateNames() const { return {options_.template_id, "code-interpreter", "base"}; }
  bool IsServedTemplate(const std::string& id) const {
    const std::vector<std::string> names = ServedTemplateNames();
    return std::find(names.begin(), names.end(), id) != names.end();
  }

  // What create, restore, fork and connect answer: the sandbox with a new
  // access token for the caller's key. `contexts_known`: a new sandbox,
  // which has no contexts yet.
  json Created(const v1::Session& session, const http::Request& request, bool contexts_known) {
    std::shared_ptr<Record> record = sandboxes_.GetOrAdd(session, options_.template_id);
    if (contexts_known) {
      absl::MutexLock lock(&record->mu);
      record->contexts_known = true;
    }
    const std::string access_token = tokens_.Seal(session.id(), request.token);
    sandboxes_.Remember(session.id(), access_token);
    return {{"sandboxID", session.id()},
            {"templateID", record->info.template_id},
            {"alias", options_.template_id},
            {"clientID", "warden"},
            {"envdVersion", options_.envd_version},
            {"envdAccessToken", access_token},
            // The SDKs send it back where they send no envdAccessToken
            // (the code interpreter's contexts calls).
            {"trafficAccessToken", access_token},
            {"domain", options_.sandbox_domain.empty() ? json(nullptr) : json(options_.sandbox_domain)}};
  }

  static json ContextJson(const v1::Context& context) {
    return {{"id", context.id()}, {"language", LanguageName(context.language())},
            {"cwd", context.cwd().empty() ? std::string(kHome) : context.cwd()}};
  }

  absl::StatusOr<v1::Session> Session(const http::Request& request) {
    v1::GetSessionRequest get;
    get.set_session_id(request.Param("id"));
    v1::Session session;
    grpc::Status s = executor_->GetSession(http::UpstreamContext(request.token, kCallTimeout).get(), get, &session);
    if (!s.ok()) return http::FromGrpc(s);
    return session;
  }

  absl::StatusOr<v1::Session> Extend(const http::Request& request, int64_t seconds) {
    v1::SetSessionTtlRequest ttl;
    ttl.set_session_id(request.Param("id"));
    ttl.set_ttl_seconds(seconds);
    v1::Session session;
    grpc::Status s = executor_->SetSessionTtl(http::UpstreamContext(request.token, kCallTimeout).get(), ttl, &session);
    if (!s.ok()) return http::FromGrpc(s);
    return session;
  }

  // The context code in `language` runs in when none is named: Python's is
  // the sandbox's own interpreter; the others get one context each, made on
  // first use.
  absl::StatusOr<std::string> DefaultContext(const SandboxRef& sandbox, v1::Language language) {
    if (language == v1::LANGUAGE_PYTHON) return sandbox.id;
    absl::MutexLock lock(&sandbox.record->mu);  // one creation per language
    if (!sandbox.record->contexts_known) {
      // A front that has not seen the sandbox yet (it just started): its
      // default context of a language is the oldest one of that language.
      v1::ListContextsRequest list;
      list.set_session_id(sandbox.id);
      v1::ListContextsResponse contexts;
      RETURN_IF_ERROR(FromGrpc(
          executor_->ListContexts(http::UpstreamContext(sandbox.api_key, kCallTimeout).get(), list, &contexts)));
      std::map<v1::Language, const v1::Context*> oldest;
      for (const v1::Context& c : contexts.contexts()) {
        if (c.id() == sandbox.id) continue;
        const v1::Context*& seen = oldest[c.language()];
        if (seen == nullptr || c.created_unix_ms() < seen->created_unix_ms()) seen = &c;
      }
      for (const auto& [lang, c] : oldest) sandbox.record->default_contexts.emplace(lang, c->id());
      sandbox.record->contexts_known = true;
    }
    auto it = sandbox.record->default_contexts.find(language);
    if (it != sandbox.record->default_contexts.end()) return it->second;
    v1::CreateContextRequest create;
    create.set_session_id(sandbox.id);
    create.set_language(language);
    v1::Context context;
    grpc::Status s = executor_->CreateContext(http::UpstreamContext(sandbox.api_key, kCallTimeout).get(),
                                              create, &context);
    if (!s.ok()) return http::FromGrpc(s);
    sandbox.record->default_contexts[language] = context.id();
    return context.id();
  }

  // A JSON object of environment variables (E2B's envs), checked.
  static absl::StatusOr<std::map<std::string, std::string>> EnvVars(const json& body, const char* key) {
    std::map<std::string, std::string> out;
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return out;
    if (!it->is_object()) return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be an object"));
    for (const auto& [name, value] : it->items()) {
      if (!value.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat("environment variable ", name, " must be a string"));
      }
      if (name.empty() || name.find_first_of(std::string("=\0", 2)) != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not an environment variable's name"));
      }
      out[name] = value.get<std::string>();
    }
    return out;
  }

  v1::Executor::StubInterface* const executor_;
  const E2bOptions options_;
  const AccessTokens tokens_;
  Sandboxes sandboxes_;
};

}  // namespace

TrafficTokenOpener AddE2bRoutes(http::Router& router, v1::Executor::StubInterface* executor, E2bOptions options) {
  auto protocol = std::make_shared<http::Protocol>();
  protocol->name = "e2b";
  protocol->find_token = [](const http::Request& request) { return http::HeaderToken(request, "X-API-KEY"); };
  // What the E2B SDKs send from a browser (the API client's X-API-KEY and
  // its default headers; the sandbox plane's ids and tokens).
  protocol->cors_request_headers = {"Content-Type", "X-API-KEY", "E2b-Sandbox-Id", "E2b-Sandbox-Port",
                                    "X-Access-Token", "E2B-Traffic-Access-Token", "browser", "lang",
                                    "lang_version", "package_version", "publisher", "sdk_runtime", "system"};
  // The list routes' paging headers, which the browser SDK reads too.
  protocol->cors_expose_headers = {"X-Next-Token", "X-Total-Running"};
  // E2B's error shape, which its SDKs read the message from.
  protocol->render_error = [](unsigned status, const absl::Status& error, const http::Request& request) {
    std::string message(error.message());
    // The hint is for the control plane; a signed file URL's 401 is envd's own.
    if (status == 401 && request.path != "/files") {
      message = absl::StrCat(message, "; send your Warden token as the E2B API key (X-API-KEY)");
    }
    return http::Response::Json(status, {{"code", status}, {"message", message}});
  };
  auto front = std::make_shared<Front>(executor, options);
  auto route = [front](absl::Status (Front::*method)(http::Request&, http::Exchange&)) {
    return [front, method](http::Request& request, http::Exchange& exchange) {
      return ((*front).*method)(request, exchange);
    };
  };
  http::RouteOptions control;
  control.max_body_bytes = 1 << 20;
  for (const char* base : {"/sandboxes", "/v2/sandboxes"}) {
    router.Add(protocol, "POST", base, route(&Front::Create), control);
    router.Add(protocol, "GET", base, route(&Front::List), control);
    router.Add(protocol, "POST", absl::StrCat(base, "/{id}/connect"), route(&Front::Connect), control);
  }
  router.Add(protocol, "GET", "/sandboxes/{id}", route(&Front::Get), control);
  router.Add(protocol, "DELETE", "/sandboxes/{id}", route(&Front::Kill), control);
  router.Add(protocol, "POST", "/sandboxes/{id}/timeout", route(&Front::SetTimeout), control);
  router.Add(protocol, "PUT", "/sandboxes/{id}/network", route(&Front::UpdateNetwork), control);
  router.Add(protocol, "POST", "/sandboxes/{id}/refreshes", route(&Front::Refresh), control);
  router.Add(protocol, "GET", "/sandboxes/{id}/metrics", route(&Front::Metrics), control);
  router.Add(protocol, "GET", "/sandboxes/metrics", route(&Front::MetricsOfMany), control);
  router.Add(protocol, "GET", "/sandboxes/{id}/logs", route(&Front::Logs), control);
  router.Add(protocol, "GET", "/v2/sandboxes/{id}/logs", route(&Front::Logs), control);
  router.Add(protocol, "POST", "/sandboxes/{id}/snapshots", route(&Front::CreateSnapshot), control);
  router.Add(protocol, "POST", "/sandboxes/{id}/fork", route(&Front::Fork), control);
  router.Add(protocol, "POST", "/sandboxes/{id}/pause", route(&Front::Pause), control);
  router.Add(protocol, "POST", "/sandboxes/{id}/resume", route(&Front::Connect), control);
  router.Add(protocol, "GET", "/snapshots", route(&Front::ListSnapshots), control);
  router.Add(protocol, "DELETE", "/templates/{id}", route(&Front::DeleteSnapshot), control);

  // The sandbox plane carries no API key: the sandbox id and its access
  // token stand for it. Every route of the plane is added through
  // `add_plane`, which checks them (Front::CheckAccess) before the handler
  // runs; the handlers look the sandbox up again for themselves.
  http::RouteOptions plane;
  plane.authenticate = false;
  plane.max_body_bytes = options.max_body_bytes;
  plane.tenant_of = [front](const http::Request& request) { return front->TenantOf(request); };
  auto add_plane = [&router, &protocol, front, plane](const char* method, const char* pattern,
                                                      http::Handler handler) {
    router.Add(protocol, method, pattern,
               [front, handler = std::move(handler)](http::Request& request, http::Exchange& exchange) {
                 absl::StatusOr<std::string> tenant = front->CheckAccess(request);
                 if (IsSandboxNotRunning(tenant.status())) {
                   return exchange.Send(http::Response::Json(
                       502, {{"code", 502},
                             {"sandboxId", request.Header("E2b-Sandbox-Id")},
                             {"message", std::string(tenant.status().message())}}));
                 }
                 if (!tenant.ok()) return tenant.status();
                 request.tenant = *std::move(tenant);  // its streams count as the owner's
                 return handler(request, exchange);
               },
               plane);
  };
  add_plane("POST", "/execute", route(&Front::Execute));
  add_plane("POST", "/contexts", route(&Front::CreateContext));
  add_plane("GET", "/contexts", route(&Front::ListContexts));
  add_plane("POST", "/contexts/{context}/restart", route(&Front::RestartContext));
  add_plane("DELETE", "/contexts/{context}", route(&Front::RemoveContext));
  add_plane("GET", "/files", route(&Front::ReadFile));
  add_plane("POST", "/files", route(&Front::WriteFile));
  add_plane("GET", "/health", route(&Front::Health));
  for (const char* prefix : {"/sandboxes", "/v2", "/contexts", "/files", "/execute", "/snapshots", "/templates"}) {
    router.Claim(protocol, prefix);
  }

  EnvdOptions envd;
  envd.max_body_bytes = std::min<size_t>(options.max_body_bytes, envd.max_body_bytes);
  envd.tenant_of = plane.tenant_of;
  AddEnvdRoutes(router, executor, [front](const http::Request& request) -> absl::StatusOr<EnvdSandbox> {
    ASSIGN_OR_RETURN(auto sandbox, front->Sandbox(request));
    return EnvdSandbox{sandbox.id, sandbox.api_key, sandbox.tenant};
  }, envd);
  return [front](const std::string& id, const std::string& token) { return front->OpenTrafficToken(id, token); };
}

}  // namespace warden::e2b
