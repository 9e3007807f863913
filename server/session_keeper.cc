#include "server/session_keeper.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "server/network.h"
#include "server/read_file.h"
#include "server/state_dir.h"
#include "spdlog/spdlog.h"

namespace warden {
namespace {

constexpr char kRecordVersion[] = "warden-session 1";

absl::Status BadRecord(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("bad session record: ", why));
}

// Session ids are ours ("s-" + hex); anything else in the directory or from
// the keeper is not a session.
bool ValidId(const std::string& id) {
  if (id.size() < 3 || id.size() > keeper::kMaxIdBytes || id.rfind("s-", 0) != 0) return false;
  return std::all_of(id.begin() + 2, id.end(), [](char c) { return isxdigit(c); });
}

WorkerHandles ToWorkerHandles(keeper::Handles& h) {
  WorkerHandles w;
  w.init_pidfd = std::move(h[keeper::kInitPidfd]);
  w.control = std::move(h[keeper::kControl]);
  w.stdin_fd = std::move(h[keeper::kStdin]);
  w.stdout_fd = std::move(h[keeper::kStdout]);
  w.stderr_fd = std::move(h[keeper::kStderr]);
  w.channel = std::move(h[keeper::kChannel]);
  w.listener = std::move(h[keeper::kListener]);
  w.program_pidfd = std::move(h[keeper::kProgramPidfd]);
  return w;
}

keeper::Handles ToKeeperHandles(WorkerHandles& w) {
  keeper::Handles h;
  h[keeper::kInitPidfd] = std::move(w.init_pidfd);
  h[keeper::kControl] = std::move(w.control);
  h[keeper::kStdin] = std::move(w.stdin_fd);
  h[keeper::kStdout] = std::move(w.stdout_fd);
  h[keeper::kStderr] = std::move(w.stderr_fd);
  h[keeper::kChannel] = std::move(w.channel);
  h[keeper::kListener] = std::move(w.listener);
  h[keeper::kProgramPidfd] = std::move(w.program_pidfd);
  return h;
}

}  // namespace

std::string SessionRecord::Encode() const {
  std::string out = absl::StrCat(kRecordVersion, "\n");
  auto line = [&out](absl::string_view key, const auto& value) { absl::StrAppend(&out, key, " ", value, "\n"); };
  line("id", id);
  line("tenant", absl::CEscape(tenant));
  line("language", LanguageName(language));
  line("memory_mb", memory_mb);
  for (const auto& [k, v] : labels) {
    line("label", absl::StrCat(absl::BytesToHexString(k), " ", absl::BytesToHexString(v)));
  }
  line("created_ns", absl::ToUnixNanos(created));
  line("expires_ns", absl::ToUnixNanos(expires));
  line("last_used_ns", absl::ToUnixNanos(last_used));
  line("idle_timeout_ms", absl::ToInt64Milliseconds(idle_timeout));
  line("cell_wall_ms", cell_defaults.wall_ms);
  line("cell_cpu_ms", cell_defaults.cpu_ms);
  line("cell_memory_mb", cell_defaults.memory_mb);
  line("cell_output_bytes", cell_defaults.output_bytes);
  line("execution_count", snapshot.execution_count);
  line("next_cell_id", snapshot.next_cell_id);
  line("program_uid", snapshot.program_host_uid);
  line("program_gid", snapshot.program_host_gid);
  line("version", absl::CEscape(snapshot.version));
  if (!cgroup_group.empty()) line("cgroup", absl::StrCat(cgroup_subtree, " ", cgroup_group));
  line("busy", busy ? 1 : 0);
  if (!network.empty()) line("network", absl::BytesToHexString(network));
  if (public_ports) line("public_ports", 1);
  if (!port_host_header.empty()) line("port_host", absl::BytesToHexString(port_host_header));
  if (!traffic_token.empty()) line("traffic_token", absl::BytesToHexString(traffic_token));
  if (!template_digest.empty()) {
    line("template", absl::StrCat(absl::BytesToHexString(template_name), " ", template_digest));
  }
  for (const VolumeMountRecord& v : volumes) {
    line("volume", absl::StrCat(absl::BytesToHexString(v.volume), " ", absl::BytesToHexString(v.path), " ",
                                v.read_only ? 1 : 0));
  }
  return out;
}

absl::StatusOr<SessionRecord> SessionRecord::Decode(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty() || lines.front() != kRecordVersion) {
    return BadRecord(absl::StrCat("it does not start with '", kRecordVersion, "'"));
  }
  SessionRecord r;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(lines[i], absl::MaxSplits(' ', 1));
    const std::string& key = kv.first;
    const std::string& value = kv.second;
    int64_t n = 0;
    const bool numeric = absl::SimpleAtoi(value, &n);
    bool ok = true;
    if (key == "id") {
      r.id = value;
      ok = ValidId(value);
    } else if (key == "tenant") {
      ok = absl::CUnescape(value, &r.tenant);
    } else if (key == "language") {
      absl::StatusOr<Language> language = ParseLanguage(value);
      ok = language.ok();
      if (ok) r.language = *language;
    } else if (key == "label") {
      // Hex: keys and values may hold anything, spaces and '=' included.
      std::pair<std::string, std::string> label = absl::StrSplit(value, absl::MaxSplits(' ', 1));
      auto hex = [](const std::string& h) {
        return h.size() % 2 == 0 && std::all_of(h.begin(), h.end(), [](char c) { return isxdigit(c); });
      };
      ok = hex(label.first) && hex(label.second);
      if (ok) r.labels[absl::HexStringToBytes(label.first)] = absl::HexStringToBytes(label.second);
    } else if (key == "version") {
      ok = absl::CUnescape(value, &r.snapshot.version);
    } else if (key == "network" || key == "port_host" || key == "traffic_token") {
      ok = value.size() % 2 == 0 && std::all_of(value.begin(), value.end(), [](char c) { return isxdigit(c); });
      if (ok) {
        const std::string bytes = absl::HexStringToBytes(value);
        (key == "network" ? r.network : key == "port_host" ? r.port_host_header : r.traffic_token) = bytes;
      }
    } else if (key == "template") {
      std::pair<std::string, std::string> t = absl::StrSplit(value, absl::MaxSplits(' ', 1));
      ok = !t.second.empty() && t.first.size() % 2 == 0 &&
           std::all_of(t.first.begin(), t.first.end(), [](char c) { return isxdigit(c); });
      if (ok) {
        r.template_name = absl::HexStringToBytes(t.first);
        r.template_digest = t.second;
      }
    } else if (key == "volume") {
      std::vector<std::string> f = absl::StrSplit(value, ' ');
      auto hex = [](const std::string& h) {
        return h.size() % 2 == 0 && std::all_of(h.begin(), h.end(), [](char c) { return isxdigit(c); });
      };
      ok = f.size() == 3 && hex(f[0]) && hex(f[1]) && (f[2] == "0" || f[2] == "1");
      if (ok) r.volumes.push_back({absl::HexStringToBytes(f[0]), absl::HexStringToBytes(f[1]), f[2] == "1"});
    } else if (key == "cgroup") {
      std::vector<std::string> f = absl::StrSplit(value, ' ');
      ok = f.size() == 2;
      if (ok) {
        r.cgroup_subtree = f[0];
        r.cgroup_group = f[1];
      }
    } else if (!numeric) {
      ok = false;
    } else if (key == "memory_mb") {
      r.memory_mb = n;
    } else if (key == "created_ns") {
      r.created = absl::FromUnixNanos(n);
    } else if (key == "expires_ns") {
      r.expires = absl::FromUnixNanos(n);
    } else if (key == "last_used_ns") {
      r.last_used = absl::FromUnixNanos(n);
    } else if (key == "idle_timeout_ms") {
      r.idle_timeout = absl::Milliseconds(n);
    } else if (key == "cell_wall_ms") {
      r.cell_defaults.wall_ms = n;
    } else if (key == "cell_cpu_ms") {
      r.cell_defaults.cpu_ms = n;
    } else if (key == "cell_memory_mb") {
      r.cell_defaults.memory_mb = n;
    } else if (key == "cell_output_bytes") {
      r.cell_defaults.output_bytes = n;
    } else if (key == "execution_count") {
      r.snapshot.execution_count = static_cast<int>(n);
    } else if (key == "next_cell_id") {
      r.snapshot.next_cell_id = static_cast<int>(n);
    } else if (key == "program_uid") {
      r.snapshot.program_host_uid = static_cast<uid_t>(n);
    } else if (key == "program_gid") {
      r.snapshot.program_host_gid = static_cast<gid_t>(n);
    } else if (key == "busy") {
      r.busy = n != 0;
    } else if (key == "public_ports") {
      r.public_ports = n != 0;
    } else {
      ok = false;
    }
    if (!ok) return BadRecord(absl::StrCat("line '", lines[i], "'"));
  }
  if (r.id.empty() || r.tenant.empty()) return BadRecord("no id or tenant");
  return r;
}

std::string AdoptReport::Summary() const {
  std::string out = absl::StrCat("adopted ", adopted.size(), " sessions from warden-keeper");
  if (!adopted.empty()) absl::StrAppend(&out, " (", absl::StrJoin(adopted, " "), ")");
  if (buffered_bytes > 0 || truncated_bytes > 0) {
    absl::StrAppend(&out, "; ", buffered_bytes, " bytes of output kept while detached, ", truncated_bytes,
                    " lost beyond the keeper's buffer");
  }
  absl::StrAppend(&out, "; dropped ", dropped.size());
  if (!dropped.empty()) absl::StrAppend(&out, ": ", absl::StrJoin(dropped, "; "));
  return out;
}

std::string SessionKeeper::SocketFromEnvironment() {
  const char* socket = getenv("WARDEN_KEEPER_SOCKET");
  return socket == nullptr ? "" : socket;
}

absl::StatusOr<std::unique_ptr<SessionKeeper>> SessionKeeper::Connect(const std::string& socket,
                                                                      const std::string& state_dir) {
  if (state_dir.empty()) {
    return absl::InvalidArgumentError(
        "warden-keeper needs a state directory for the sessions' metadata: set state_dir");
  }
  const std::string dir = state_dir + "/sessions";
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", dir));
  }
  chmod(dir.c_str(), 0700);
  ASSIGN_OR_RETURN(auto client, keeper::KeeperClient::Connect(socket));
  return std::unique_ptr<SessionKeeper>(new SessionKeeper(std::move(client), dir));
}

absl::Status SessionKeeper::Receive(bool drop_all) {
  ASSIGN_OR_RETURN(std::vector<keeper::HeldSandbox> held, client_->Adopt());
  std::set<std::string> paired;
  for (keeper::HeldSandbox& sandbox : held) {
    Received r;
    r.held = std::move(sandbox);
    const std::string id = r.held.id;
    if (!ValidId(id)) {
      r.problem = "not a session id";
    } else if (drop_all) {
      r.problem = "wardend --drop-sessions";
    } else if (absl::StatusOr<std::string> text = ReadWholeFile(PathOf(id)); !text.ok()) {
      r.problem = "no metadata";
    } else if (absl::StatusOr<SessionRecord> record = SessionRecord::Decode(*text); !record.ok()) {
      r.problem = std::string(record.status().message());
    } else {
      r.record = *record;
      paired.insert(id);
      if (r.held.ended) {
        r.problem = absl::StrCat("its sandbox ended while no wardend was attached (wait status ",
                                 r.held.wait_status, ")");
      }
    }
    received_.push_back(std::move(r));
  }
  // Metadata of sandboxes the keeper no longer holds: nothing to adopt.
  if (DIR* d = opendir(dir_.c_str()); d != nullptr) {
    while (struct dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (!paired.contains(name)) orphan_records_.push_back(name);
    }
    closedir(d);
  }
  return absl::OkStatus();
}

std::map<std::string, std::set<std::string>> SessionKeeper::KeptGroups() const {
  std::map<std::string, std::set<std::string>> keep;
  for (const Received& r : received_) {
    if (!r.problem.empty() || !r.record || r.record->cgroup_group.empty()) continue;
    keep[r.record->cgroup_subtree].insert(r.record->cgroup_group);
  }
  return keep;
}

AdoptReport SessionKeeper::AdoptInto(Engine& engine, Executor& executor) {
  AdoptReport report;
  uid_t max_uid = 0;
  for (Received& r : received_) {
    const std::string id = r.held.id;
    for (int s = 0; s < 3; ++s) {
      report.buffered_bytes += static_cast<int64_t>(r.held.buffered[s].size());
      report.truncated_bytes += r.held.dropped[s];
    }
    absl::Status adopted = absl::OkStatus();
    if (r.problem.empty()) {
      const SessionRecord& record = *r.record;
      std::unique_ptr<Cgroup> cgroup;
      if (!record.cgroup_group.empty()) {
        if (executor.cgroups() == nullptr) {
          adopted = absl::FailedPreconditionError("this wardend runs without cgroups");
        } else {
          absl::StatusOr<std::unique_ptr<Cgroup>> group =
              executor.cgroups()->OpenGroup(record.cgroup_subtree, record.cgroup_group);
          if (group.ok()) {
            cgroup = *std::move(group);
          } else {
            adopted = group.status();
          }
        }
      }
      absl::StatusOr<std::unique_ptr<Worker>> worker =
          adopted.ok() ? Worker::Adopt(ToWorkerHandles(r.held.handles), std::move(cgroup),
                                       record.snapshot.program_host_uid, record.snapshot.program_host_gid)
                       : absl::StatusOr<std::unique_ptr<Worker>>(adopted);
      if (worker.ok()) {
        auto entry = std::make_unique<ManagedSession>();
        entry->id = record.id;
        entry->tenant = record.tenant;
        entry->language = record.language;
        entry->labels = record.labels;
        entry->created = record.created;
        entry->set_expires(record.expires);
        entry->idle_timeout = record.idle_timeout;
        entry->cell_defaults = record.cell_defaults;
        entry->memory_mb = record.memory_mb;
        if (!record.network.empty()) {
          // As it was made (and checked) when the session was created.
          absl::StatusOr<egress::PolicySpec> spec = PolicySpecFromJson(record.network);
          absl::StatusOr<egress::Policy> policy =
              spec.ok() ? egress::Policy::Build(*spec, "network") : absl::StatusOr<egress::Policy>(spec.status());
          if (policy.ok()) {
            absl::MutexLock lock(&entry->network_mu);
            entry->network = std::make_shared<const egress::Policy>(*std::move(policy));
          } else {
            spdlog::warn("session {}: its network policy was not kept ({}); it has none now", record.id,
                         policy.status().ToString());
          }
        }
        entry->public_ports = record.public_ports;
        entry->port_host_header = record.port_host_header;
        entry->traffic_token = record.traffic_token;
        entry->volumes = record.volumes;
        if (!record.template_digest.empty()) {
          auto t = engine.TemplateWithDigest(record.tenant, record.template_name, record.template_digest);
          if (t.ok()) entry->sandbox_template = *std::move(t);
          else adopted = t.status();
        }
        Session::Handover snapshot = record.snapshot;
        snapshot.busy = record.busy;
        snapshot.pending_stdout = std::move(r.held.buffered[keeper::kStreamStdout]);
        snapshot.pending_stderr = std::move(r.held.buffered[keeper::kStreamStderr]);
        snapshot.pending_channel = std::move(r.held.buffered[keeper::kStreamChannel]);
        if (adopted.ok()) {
          absl::StatusOr<std::shared_ptr<ManagedSession>> session =
              engine.AdoptSession(std::move(entry), *std::move(worker), snapshot, record.last_used);
          adopted = session.status();
        }
      } else {
        adopted = worker.status();
      }
      if (adopted.ok()) {
        report.adopted.push_back(id);
        max_uid = std::max(max_uid, record.snapshot.program_host_uid);
        continue;
      }
      r.problem = std::string(adopted.message());
      // Its group was spared by the reclaim: it goes now.
      if (!record.cgroup_group.empty() && executor.cgroups() != nullptr) {
        if (auto group = executor.cgroups()->OpenGroup(record.cgroup_subtree, record.cgroup_group);
            group.ok()) {
          (void)(*group)->Destroy();
        }
      }
    }
    // Not adopted: its sandbox ends now (the keeper kills it; its cgroup
    // went, or goes, with the predecessor's subtree).
    report.dropped.push_back(absl::StrCat(id, ": ", r.problem));
    (void)client_->Drop(id);
    if (ValidId(id)) unlink(PathOf(id).c_str());
  }
  for (const std::string& name : orphan_records_) {
    report.dropped.push_back(absl::StrCat(name, ": metadata without a sandbox"));
    unlink(PathOf(name).c_str());
  }
  received_.clear();
  orphan_records_.clear();
  // New sandboxes must not run as the host ids of adopted ones.
  if (max_uid > 0) {
    for (int i = 0; i < (1 << 20); ++i) {
      if (executor.ProgramHostIds(executor.ReserveIdentity()).first > max_uid) break;
    }
  }
  return report;
}

absl::Status SessionKeeper::Persist(const ManagedSession& entry) {
  SessionRecord record;
  record.id = entry.id;
  record.tenant = entry.tenant;
  record.language = entry.language;
  record.memory_mb = entry.memory_mb;
  record.labels = entry.labels;
  record.created = entry.created;
  record.expires = entry.expires();
  record.last_used = entry.last_used();
  record.idle_timeout = entry.idle_timeout;
  record.cell_defaults = entry.cell_defaults;
  record.snapshot = entry.session->Describe();
  record.busy = entry.busy();
  {
    absl::MutexLock lock(&entry.network_mu);
    if (entry.network) record.network = PolicyToJson(*entry.network);
  }
  record.public_ports = entry.public_ports;
  record.port_host_header = entry.port_host_header;
  record.traffic_token = entry.traffic_token;
  if (entry.sandbox_template != nullptr) {
    record.template_name = entry.sandbox_template->name;
    record.template_digest = entry.sandbox_template->digest;
  }
  record.volumes = entry.volumes;
  if (!record.snapshot.cgroup_paths.empty()) {
    // .../<subtree>/<group>
    const std::string& path = record.snapshot.cgroup_paths.front();
    const size_t slash = path.rfind('/');
    const size_t parent = path.rfind('/', slash - 1);
    record.cgroup_group = path.substr(slash + 1);
    record.cgroup_subtree = path.substr(parent + 1, slash - parent - 1);
  }
  return WriteFileAtomically(PathOf(entry.id), record.Encode());
}

void SessionKeeper::OnRegistered(const ManagedSession& entry) {
  // A session with a shared workspace has further sandboxes (contexts,
  // commands) the keeper does not hold: it ends with this wardend.
  if (entry.machine != nullptr || entry.session == nullptr) return;
  absl::StatusOr<WorkerHandles> handles = entry.session->DuplicateHandles();
  absl::Status s = handles.status();
  if (s.ok()) s = Persist(entry);
  if (s.ok()) s = client_->Hold(entry.id, ToKeeperHandles(*handles));
  if (!s.ok()) {
    spdlog::warn("session {} is not kept across restarts: {}", entry.id, std::string(s.message()));
  }
}

void SessionKeeper::OnRemoved(const ManagedSession& entry) {
  (void)client_->Drop(entry.id);
  unlink(PathOf(entry.id).c_str());
}

void SessionKeeper::PersistAll(const std::vector<std::shared_ptr<ManagedSession>>& sessions) {
  for (const auto& entry : sessions) {
    if (entry->machine != nullptr) continue;
    if (absl::Status s = Persist(*entry); !s.ok()) {
      spdlog::warn("session {}: {}", entry->id, std::string(s.message()));
    }
  }
}

void SessionKeeper::Stop() {
  (void)client_->Stop();
  rmdir(dir_.c_str());  // empty once every session was removed
}

}  // namespace warden
