#include "server/session_ledger.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "sandbox/unique_fd.h"

namespace warden {
namespace {

using json = nlohmann::json;

absl::Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("creating ", path,
                                                   " (fleet.shared_dir must be writable by every node)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1 << 20)) return absl::DataLossError(absl::StrCat(path, " is too large for a ledger record"));
  }
}


absl::StatusOr<LedgerRecord::State> ParseState(const std::string& name) {
  if (name == "handed_over") return LedgerRecord::State::kHandedOver;
  if (name == "owned") return LedgerRecord::State::kOwned;
  if (name == "lost") return LedgerRecord::State::kLost;
  return absl::DataLossError(absl::StrCat("unknown ledger state '", name, "'"));
}

absl::StatusOr<LedgerRecord> ParseRecord(const std::string& text, int64_t generation) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("a ledger record is not JSON");
  LedgerRecord r;
  r.generation = generation;
  ASSIGN_OR_RETURN(r.state, ParseState(j.value("state", "")));
  r.node = j.value("node", "");
  r.epoch = j.value("epoch", "");
  r.tenant = j.value("tenant", "");
  r.snapshot_id = j.value("snapshot_id", "");
  r.reason = j.value("reason", "");
  r.at = absl::FromUnixMillis(j.value("at_unix_ms", int64_t{0}));
  return r;
}

// The generations present, by the names "<n>.json".
std::vector<int64_t> Generations(const std::string& dir) {
  std::vector<int64_t> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    absl::string_view name = e->d_name;
    if (!absl::ConsumeSuffix(&name, ".json")) continue;
    int64_t n = 0;
    if (absl::SimpleAtoi(name, &n) && n > 0) out.push_back(n);
  }
  closedir(d);
  return out;
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

}  // namespace

const char* LedgerStateName(LedgerRecord::State state) {
  switch (state) {
    case LedgerRecord::State::kHandedOver: return "handed_over";
    case LedgerRecord::State::kOwned: return "owned";
    case LedgerRecord::State::kLost: return "lost";
  }
  return "unknown";
}

absl::StatusOr<std::string> SessionLedger::DirOf(const std::string& session_id) const {
  // Ours: "s-" + hex + "-" + a DNS label. Nothing else names a path.
  const bool ok = session_id.size() > 2 && session_id.size() <= 96 && absl::StartsWith(session_id, "s-") &&
                  std::all_of(session_id.begin(), session_id.end(), [](char c) {
                    return absl::ascii_islower(static_cast<unsigned char>(c)) ||
                           absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-';
                  });
  if (!ok) return absl::NotFoundError(absl::StrCat("no session '", session_id, "'"));
  return absl::StrCat(dir_, "/", session_id);
}

absl::StatusOr<std::optional<LedgerRecord>> SessionLedger::Current(const std::string& session_id) const {
  ASSIGN_OR_RETURN(std::string dir, DirOf(session_id));
  std::vector<int64_t> generations = Generations(dir);
  if (generations.empty()) return std::optional<LedgerRecord>();
  int64_t newest = *std::max_element(generations.begin(), generations.end());
  // A directory listing may be cached (NFS): look further by name.
  while (Exists(absl::StrCat(dir, "/", newest + 1, ".json"))) ++newest;
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(absl::StrCat(dir, "/", newest, ".json")));
  ASSIGN_OR_RETURN(LedgerRecord record, ParseRecord(text, newest));
  return std::optional<LedgerRecord>(std::move(record));
}

absl::StatusOr<LedgerRecord> SessionLedger::Append(const std::string& session_id, int64_t after,
                                                   LedgerRecord record) {
  ASSIGN_OR_RETURN(std::string dir, DirOf(session_id));
  RETURN_IF_ERROR(MakeDir(dir_));
  RETURN_IF_ERROR(MakeDir(dir));
  record.generation = after + 1;
  if (record.at == absl::Time()) record.at = absl::Now();
  const std::string text = json{{"state", LedgerStateName(record.state)},
                                {"node", record.node},
                                {"epoch", record.epoch},
                                {"tenant", record.tenant},
                                {"snapshot_id", record.snapshot_id},
                                {"reason", record.reason},
                                {"at_unix_ms", absl::ToUnixMillis(record.at)}}
                               .dump();
  // Written whole under a private name, then linked into place: link(2)
  // fails with EEXIST if the generation exists, which is the fence.
  const std::string tmp = absl::StrCat(dir, "/.tmp-", record.generation, "-", SessionManager::RandomHex());
  {
    UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("creating ", tmp));
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = write(fd.get(), text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int saved = errno;
        unlink(tmp.c_str());
        return absl::ErrnoToStatus(saved, absl::StrCat("writing ", tmp));
      }
      done += static_cast<size_t>(n);
    }
    if (fsync(fd.get()) != 0) {
      const int saved = errno;
      unlink(tmp.c_str());
      return absl::ErrnoToStatus(saved, absl::StrCat("fsync ", tmp));
    }
  }
  const std::string path = absl::StrCat(dir, "/", record.generation, ".json");
  const int linked = link(tmp.c_str(), path.c_str());
  const int saved = errno;
  unlink(tmp.c_str());
  if (linked != 0) {
    if (saved == EEXIST) {
      return absl::AbortedError(absl::StrCat("session ", session_id, " moved meanwhile (generation ",
                                             record.generation, " exists)"));
    }
    return absl::ErrnoToStatus(saved, absl::StrCat("linking ", path));
  }
  return record;
}

void SessionLedger::Forget(const std::string& session_id) {
  absl::StatusOr<std::string> dir = DirOf(session_id);
  if (!dir.ok()) return;
  DIR* d = opendir(dir->c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
  }
  closedir(d);
  for (const std::string& name : names) unlink(absl::StrCat(*dir, "/", name).c_str());
  rmdir(dir->c_str());
}

int SessionLedger::Sweep(absl::Time before) {
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> ids;
  while (struct dirent* e = readdir(d)) {
    if (absl::StartsWith(e->d_name, "s-")) ids.push_back(e->d_name);
  }
  closedir(d);
  int swept = 0;
  for (const std::string& id : ids) {
    absl::StatusOr<std::optional<LedgerRecord>> current = Current(id);
    if (current.ok() && *current && (*current)->at < before) {
      Forget(id);
      ++swept;
    }
  }
  return swept;
}

std::string EncodeSessionMeta(const ManagedSession& entry) {
  const SandboxTemplate* t = entry.sandbox_template.get();
  return json{{"labels", entry.labels},
              {"template", t ? t->name : ""},
              {"template_digest", t ? t->digest : ""},
              {"volumes", VolumesToJson(entry.volumes)},
              {"created_unix_ms", absl::ToUnixMillis(entry.created)},
              {"expires_unix_ms", absl::ToUnixMillis(entry.expires())},
              {"idle_timeout_seconds", absl::ToInt64Seconds(entry.idle_timeout)},
              {"memory_mb", entry.memory_mb},
              {"cell_defaults",
               {{"wall_ms", entry.cell_defaults.wall_ms},
                {"cpu_ms", entry.cell_defaults.cpu_ms},
                {"memory_mb", entry.cell_defaults.memory_mb},
                {"output_bytes", entry.cell_defaults.output_bytes}}}}
      .dump();
}

absl::Status DecodeSessionMeta(const std::string& text, ManagedSession* entry, SessionMetaRefs* refs) {
  if (text.empty()) return absl::OkStatus();
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("a session's metadata is not JSON");
  entry->labels = j.value("labels", entry->labels);
  if (refs != nullptr) {
    refs->template_name = j.value("template", "");
    refs->template_digest = j.value("template_digest", "");
    if (j.contains("volumes")) refs->volumes = VolumesFromJson(j["volumes"]);
  }
  if (j.contains("created_unix_ms")) entry->created = absl::FromUnixMillis(j.value("created_unix_ms", int64_t{0}));
  if (j.contains("expires_unix_ms")) entry->set_expires(absl::FromUnixMillis(j.value("expires_unix_ms", int64_t{0})));
  if (j.contains("idle_timeout_seconds")) entry->idle_timeout = absl::Seconds(j.value("idle_timeout_seconds", int64_t{0}));
  entry->memory_mb = j.value("memory_mb", entry->memory_mb);
  if (const auto it = j.find("cell_defaults"); it != j.end() && it->is_object()) {
    entry->cell_defaults.wall_ms = it->value("wall_ms", entry->cell_defaults.wall_ms);
    entry->cell_defaults.cpu_ms = it->value("cpu_ms", entry->cell_defaults.cpu_ms);
    entry->cell_defaults.memory_mb = it->value("memory_mb", entry->cell_defaults.memory_mb);
    entry->cell_defaults.output_bytes = it->value("output_bytes", entry->cell_defaults.output_bytes);
  }
  return absl::OkStatus();
}

}  // namespace warden
