#include "server/snapshot_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "sandbox/unique_fd.h"

namespace warden {
namespace {

using json = nlohmann::json;

constexpr char kIdPrefix[] = "snap-";
constexpr size_t kIdHexDigits = 24;

std::string NewId() {
  unsigned char bytes[kIdHexDigits / 2];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  return kIdPrefix +
         absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
}

bool WellFormedId(const std::string& id) {
  if (!absl::StartsWith(id, kIdPrefix) || id.size() != sizeof(kIdPrefix) - 1 + kIdHexDigits) return false;
  return std::all_of(id.begin() + sizeof(kIdPrefix) - 1, id.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

absl::Status NotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("no snapshot '", id, "'; ListSnapshots shows yours"));
}

// What the caller (a tenant) is told when the disk fails us: what failed
// and why, never where (the daemon's own paths are for its log), and what
// to do. The operator's log line carries the path.
absl::Status DiskError(int err, absl::string_view doing, const std::string& path) {
  spdlog::warn("snapshot store: {} {}: {}", std::string(doing), path, strerror(err));
  if (err == ENOSPC || err == EDQUOT) {
    return absl::ResourceExhaustedError(absl::StrCat(
        doing, ": the server's snapshot storage is full; delete snapshots you no longer need "
        "(DeleteSnapshot), or ask the operator for room"));
  }
  return absl::Status(absl::ErrnoToStatus(err, "").code(),
                      absl::StrCat(doing, ": ", strerror(err), " (the server's log names the file)"));
}

// mkdir -p, 0700 for every directory it makes.
absl::Status MakeDirs(const std::string& path) {
  for (size_t slash = 1; slash != std::string::npos;) {
    slash = path.find('/', slash + 1);
    const std::string prefix = path.substr(0, slash);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      const int err = errno;
      spdlog::error("snapshot store: cannot create {}: {} (set snapshots.dir to a directory wardend may write)",
                    prefix, strerror(err));
      return absl::FailedPreconditionError(absl::StrCat(
          "the server cannot store snapshots: its snapshot directory cannot be created (", strerror(err),
          "); the operator's log says where"));
    }
  }
  return absl::OkStatus();
}

// A record is a few hundred bytes; a file far larger is not one.
constexpr size_t kMaxRecordBytes = 1 << 20;

absl::StatusOr<std::string> ReadRecordFile(const std::string& path, const std::string& id) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) {
    if (errno == ENOENT) return NotFound(id);
    return DiskError(errno, absl::StrCat("reading snapshot ", id, "'s record"), path);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > static_cast<off_t>(kMaxRecordBytes)) {
    spdlog::warn("snapshot store: {} is not a record (not a regular file, or too large)", path);
    return absl::DataLossError(absl::StrCat("snapshot ", id, " is damaged (its record is not one); delete it "
                                            "with DeleteSnapshot"));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return DiskError(errno, absl::StrCat("reading snapshot ", id, "'s record"), path);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxRecordBytes) {
      return absl::DataLossError(absl::StrCat("snapshot ", id, " is damaged (its record grew past ",
                                              kMaxRecordBytes, " bytes); delete it with DeleteSnapshot"));
    }
  }
}

absl::Status WriteAll(const UniqueFd& fd, const std::string& data, const std::string& path,
                      absl::string_view doing) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return DiskError(errno, doing, path);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Writes `path` whole or not at all: `fill` writes a 0600 temporary, which
// is then renamed. `doing` says what, for errors ("storing snapshot X").
absl::Status WriteAtomically(const std::string& path, absl::string_view doing,
                             const std::function<absl::Status(const UniqueFd&)>& fill) {
  const std::string tmp = path + ".tmp";
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return DiskError(errno, doing, tmp);
  if (absl::Status s = fill(fd); !s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    unlink(tmp.c_str());
    return DiskError(saved, doing, tmp);
  }
  return absl::OkStatus();
}

}  // namespace

json VolumesToJson(const std::vector<VolumeMountRecord>& volumes) {
  json out = json::array();
  for (const VolumeMountRecord& v : volumes) out.push_back({{"volume", v.volume}, {"path", v.path}, {"read_only", v.read_only}});
  return out;
}

std::vector<VolumeMountRecord> VolumesFromJson(const json& j) {
  std::vector<VolumeMountRecord> out;
  if (!j.is_array()) return out;
  for (const json& v : j) {
    if (!v.is_object()) continue;
    out.push_back({v.value("volume", ""), v.value("path", ""), v.value("read_only", false)});
  }
  return out;
}

namespace {

json ToJson(const SnapshotRecord& r) {
  return json{{"id", r.id},
              {"session_id", r.session_id},
              {"language", LanguageName(r.language)},
              {"created_unix_ms", absl::ToUnixMillis(r.created)},
              {"size_bytes", r.size_bytes},
              {"execution_count", r.execution_count},
              {"memory_mb", r.memory_mb},
              {"left_out", r.left_out},
              {"hibernation", r.hibernation},
              {"session_meta", r.session_meta},
              {"name", r.name},
              {"shared_workspace", r.shared_workspace},
              {"workspace_aliases", r.workspace_aliases},
              {"workspace_path", r.workspace_path},
              {"env", r.env},
              {"template", r.template_name},
              {"template_digest", r.template_digest},
              {"volumes", VolumesToJson(r.volumes)}};
}

// The fields of a record read from disk, each checked for its type and
// bounds: a damaged disk, a hand edit or another wardend version on a
// fleet's shared directory gives a clear error naming the field, never
// an exception (nlohmann's value() throws on a type it did not expect).
class RecordFields {
 public:
  explicit RecordFields(const json& j) : j_(j) {}

  void String(const char* key, std::string* out, size_t max = 64 << 10) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_string() || v->get_ref<const std::string&>().size() > max) return Bad(key, "a string");
    *out = v->get<std::string>();
  }
  template <typename T>
  void Number(const char* key, T* out, T min, T max) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_number_integer()) return Bad(key, "a whole number");
    if (v->is_number_unsigned() ? v->get<uint64_t>() > static_cast<uint64_t>(max)
                                : (v->get<int64_t>() < static_cast<int64_t>(min) ||
                                   v->get<int64_t>() > static_cast<int64_t>(max))) {
      return Bad(key, absl::StrCat("a number from ", min, " to ", max));
    }
    *out = static_cast<T>(v->get<int64_t>());
  }
  void Bool(const char* key, bool* out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) return Bad(key, "true or false");
    *out = v->get<bool>();
  }
  void Strings(const char* key, std::vector<std::string>* out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_array() || v->size() > 4096) return Bad(key, "a list of strings");
    for (const json& item : *v) {
      if (!item.is_string()) return Bad(key, "a list of strings");
      out->push_back(item.get<std::string>());
    }
  }
  void StringMap(const char* key, std::map<std::string, std::string>* out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_object() || v->size() > 4096) return Bad(key, "an object of strings");
    for (const auto& [name, item] : v->items()) {
      if (!item.is_string()) return Bad(key, "an object of strings");
      (*out)[name] = item.get<std::string>();
    }
  }
  void Problem(const std::string& problem) {
    if (problem_.empty()) problem_ = problem;
  }
  const std::string& problem() const { return problem_; }

 private:
  const json* Find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  void Bad(const char* key, absl::string_view what) {
    Problem(absl::StrCat("'", key, "' must be ", what));
  }
  const json& j_;
  std::string problem_;
};

absl::StatusOr<SnapshotRecord> FromJson(const std::string& text, const std::string& tenant, const std::string& id) {
  auto damaged = [&id](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("snapshot ", id, " is damaged (its record: ", why,
                                            "); delete it with DeleteSnapshot"));
  };
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return damaged("not a JSON object");
  SnapshotRecord r;
  r.tenant = tenant;
  RecordFields f(j);
  std::string language = "python";
  f.String("id", &r.id, 64);
  f.String("session_id", &r.session_id, 256);
  f.String("language", &language, 64);
  int64_t created_ms = 0;
  f.Number<int64_t>("created_unix_ms", &created_ms, 0, int64_t{1} << 50);
  f.Number<int64_t>("size_bytes", &r.size_bytes, 0, int64_t{1} << 50);
  f.Number<int>("execution_count", &r.execution_count, 0, INT32_MAX);
  f.Number<int64_t>("memory_mb", &r.memory_mb, 0, int64_t{1} << 30);
  f.StringMap("left_out", &r.left_out);
  f.Bool("hibernation", &r.hibernation);
  f.String("session_meta", &r.session_meta);
  f.String("name", &r.name, 128);
  f.Bool("shared_workspace", &r.shared_workspace);
  f.Strings("workspace_aliases", &r.workspace_aliases);
  f.String("workspace_path", &r.workspace_path, 4096);
  f.Strings("env", &r.env);
  f.String("template", &r.template_name, 256);
  f.String("template_digest", &r.template_digest, 128);
  if (!f.problem().empty()) return damaged(f.problem());
  if (r.id != id) return damaged(absl::StrCat("it names another snapshot, '", r.id.substr(0, 64), "'"));
  auto parsed = ParseLanguage(language);
  if (!parsed.ok()) return damaged(absl::StrCat("'language' is not one Warden serves: ", language.substr(0, 64)));
  r.language = *parsed;
  r.created = absl::FromUnixMillis(created_ms);
  auto absolute = [](const std::string& p) {
    return !p.empty() && p[0] == '/' && p.find('\0') == std::string::npos;
  };
  if (!r.workspace_path.empty() && !absolute(r.workspace_path)) return damaged("'workspace_path' must be absolute");
  for (const std::string& alias : r.workspace_aliases) {
    if (!absolute(alias)) return damaged("'workspace_aliases' must be absolute paths");
  }
  for (const std::string& e : r.env) {
    if (e.find('=') == std::string::npos || e.front() == '=' || e.find('\0') != std::string::npos) {
      return damaged("'env' must hold KEY=value entries");
    }
  }
  if (auto volumes = j.find("volumes"); volumes != j.end() && !volumes->is_null()) {
    if (!volumes->is_array() || volumes->size() > 256) return damaged("'volumes' must be a list of mounts");
    for (const json& v : *volumes) {
      if (!v.is_object() || !v.contains("volume") || !v["volume"].is_string() || !v.contains("path") ||
          !v["path"].is_string() || !absolute(v["path"].get<std::string>()) ||
          (v.contains("read_only") && !v["read_only"].is_boolean())) {
        return damaged("'volumes' must hold {volume, path, read_only} mounts at absolute paths");
      }
      r.volumes.push_back({v["volume"].get<std::string>(), v["path"].get<std::string>(),
                           v.contains("read_only") && v["read_only"].get<bool>()});
    }
  }
  return r;
}

}  // namespace

std::string SnapshotStore::TenantDir(const std::string& tenant) const {
  // Hex: any tenant name is one safe path component, and no two collide.
  return absl::StrCat(dir_, "/t-", absl::BytesToHexString(tenant));
}

absl::StatusOr<std::string> SnapshotStore::PathOf(const std::string& tenant, const std::string& id,
                                                  const char* suffix) const {
  if (!WellFormedId(id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", id, "' is not a snapshot id; ids look like snap-0123456789abcdef01234567"));
  }
  return absl::StrCat(TenantDir(tenant), "/", id, suffix);
}

absl::StatusOr<SnapshotRecord> SnapshotStore::Put(SnapshotRecord record, const SnapshotArchive& archive) {
  absl::MutexLock lock(&mu_);
  const int64_t used = UsedBytes(record.tenant);
  const int64_t size = archive.bytes;
  if (used + size > max_bytes_per_tenant_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this snapshot is ", size, " bytes and your snapshots already hold ", used, " of your ",
        max_bytes_per_tenant_, " bytes; delete some with DeleteSnapshot (or close hibernated "
        "sessions), or ask the operator to raise snapshots.max_bytes_per_tenant"));
  }
  RETURN_IF_ERROR(MakeDirs(TenantDir(record.tenant)));
  record.id = NewId();
  record.size_bytes = size;
  ASSIGN_OR_RETURN(std::string archive_path, PathOf(record.tenant, record.id, ".tar"));
  ASSIGN_OR_RETURN(std::string record_path, PathOf(record.tenant, record.id, ".json"));
  const std::string doing = absl::StrCat("storing snapshot ", record.id);
  RETURN_IF_ERROR(
      WriteAtomically(archive_path, doing, [&](const UniqueFd& fd) { return CopyArchive(archive, fd); }));
  // The record last: a snapshot without one is not listed (nor counted twice).
  const std::string text = ToJson(record).dump();
  if (auto s = WriteAtomically(record_path, doing,
                               [&](const UniqueFd& fd) { return WriteAll(fd, text, record_path, doing); });
      !s.ok()) {
    unlink(archive_path.c_str());
    return s;
  }
  return record;
}

absl::StatusOr<SnapshotRecord> SnapshotStore::Get(const std::string& tenant, const std::string& id) const {
  ASSIGN_OR_RETURN(std::string path, PathOf(tenant, id, ".json"));
  ASSIGN_OR_RETURN(std::string text, ReadRecordFile(path, id));
  return FromJson(text, tenant, id);
}

absl::StatusOr<SnapshotArchive> SnapshotStore::OpenArchive(const std::string& tenant,
                                                           const std::string& id) const {
  ASSIGN_OR_RETURN(std::string path, PathOf(tenant, id, ".tar"));
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) {
    if (errno == ENOENT) {
      return absl::DataLossError(absl::StrCat("snapshot ", id, " is damaged (its archive is gone); delete it "
                                              "with DeleteSnapshot"));
    }
    return DiskError(errno, absl::StrCat("reading snapshot ", id), path);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return DiskError(errno, absl::StrCat("reading snapshot ", id), path);
  if (!S_ISREG(st.st_mode)) {
    return absl::DataLossError(absl::StrCat("snapshot ", id, " is damaged (its archive is not a file); delete "
                                            "it with DeleteSnapshot"));
  }
  return SnapshotArchive{std::move(fd), st.st_size};
}

std::vector<SnapshotRecord> SnapshotStore::List(const std::string& tenant) const {
  std::vector<SnapshotRecord> out;
  DIR* dir = opendir(TenantDir(tenant).c_str());
  if (dir == nullptr) return out;
  while (struct dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (!absl::EndsWith(name, ".json")) continue;
    const std::string id = name.substr(0, name.size() - 5);
    if (!WellFormedId(id)) continue;  // not one of ours (a .tmp, a stray file)
    auto record = Get(tenant, id);
    if (record.ok() && !record->hibernation) {
      out.push_back(*std::move(record));
    } else if (!record.ok() && !absl::IsNotFound(record.status())) {
      // Reported and skipped: the others are listed all the same.
      spdlog::warn("snapshot store: tenant {}: {}", tenant, std::string(record.status().message()));
    }
  }
  closedir(dir);
  std::sort(out.begin(), out.end(),
            [](const SnapshotRecord& a, const SnapshotRecord& b) { return a.created < b.created; });
  return out;
}

absl::StatusOr<SnapshotRecord> SnapshotStore::FindHibernation(const std::string& tenant,
                                                              const std::string& session_id) const {
  std::optional<SnapshotRecord> newest;
  DIR* dir = opendir(TenantDir(tenant).c_str());
  if (dir != nullptr) {
    while (struct dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      if (!absl::EndsWith(name, ".json") || !WellFormedId(name.substr(0, name.size() - 5))) continue;
      auto record = Get(tenant, name.substr(0, name.size() - 5));
      if (!record.ok() && !absl::IsNotFound(record.status())) {
        spdlog::warn("snapshot store: tenant {}: {}", tenant, std::string(record.status().message()));
      }
      if (record.ok() && record->hibernation && record->session_id == session_id &&
          (!newest || record->created > newest->created)) {
        newest = *std::move(record);
      }
    }
    closedir(dir);
  }
  if (!newest) {
    return absl::NotFoundError(absl::StrCat("no hibernation snapshot of session ", session_id));
  }
  return *std::move(newest);
}

absl::Status SnapshotStore::Delete(const std::string& tenant, const std::string& id) {
  ASSIGN_OR_RETURN(std::string record_path, PathOf(tenant, id, ".json"));
  ASSIGN_OR_RETURN(std::string archive_path, PathOf(tenant, id, ".tar"));
  if (unlink(record_path.c_str()) != 0) {
    if (errno == ENOENT) return NotFound(id);
    return DiskError(errno, absl::StrCat("deleting snapshot ", id), record_path);
  }
  unlink(archive_path.c_str());
  return absl::OkStatus();
}

int64_t SnapshotStore::UsedBytes(const std::string& tenant) const {
  const std::string dir_path = TenantDir(tenant);
  int64_t used = 0;
  DIR* dir = opendir(dir_path.c_str());
  if (dir == nullptr) return 0;
  while (struct dirent* e = readdir(dir)) {
    struct stat st;
    if (e->d_name[0] != '.' && fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      used += st.st_size;
    }
  }
  closedir(dir);
  return used;
}

}  // namespace warden
