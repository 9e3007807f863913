#include "server/snapshot_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
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

// mkdir -p, 0700 for every directory it makes.
absl::Status MakeDirs(const std::string& path) {
  for (size_t slash = 1; slash != std::string::npos;) {
    slash = path.find('/', slash + 1);
    const std::string prefix = path.substr(0, slash);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno, absl::StrCat(
          "creating the snapshot directory ", prefix,
          " (set snapshots.dir to a directory wardend may write)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWhole(const std::string& path, const std::string& id) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return NotFound(id);
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

absl::Status WriteAll(const UniqueFd& fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("writing ", path));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Writes `path` whole or not at all: `fill` writes a 0600 temporary, which
// is then renamed.
absl::Status WriteAtomically(const std::string& path,
                             const std::function<absl::Status(const UniqueFd&)>& fill) {
  const std::string tmp = path + ".tmp";
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("creating ", tmp));
  if (absl::Status s = fill(fd); !s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(saved, absl::StrCat("renaming ", tmp));
  }
  return absl::OkStatus();
}

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
              {"env", r.env}};
}

absl::StatusOr<SnapshotRecord> FromJson(const std::string& text, const std::string& tenant) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("a snapshot record is not JSON");
  SnapshotRecord r;
  r.tenant = tenant;
  r.id = j.value("id", "");
  r.session_id = j.value("session_id", "");
  auto language = ParseLanguage(j.value("language", "python"));
  if (!language.ok()) return language.status();
  r.language = *language;
  r.created = absl::FromUnixMillis(j.value("created_unix_ms", int64_t{0}));
  r.size_bytes = j.value("size_bytes", int64_t{0});
  r.execution_count = j.value("execution_count", 0);
  r.memory_mb = j.value("memory_mb", int64_t{0});
  r.left_out = j.value("left_out", std::map<std::string, std::string>{});
  r.hibernation = j.value("hibernation", false);
  r.session_meta = j.value("session_meta", "");
  r.name = j.value("name", "");
  r.shared_workspace = j.value("shared_workspace", false);
  r.workspace_aliases = j.value("workspace_aliases", std::vector<std::string>{});
  r.workspace_path = j.value("workspace_path", "");
  r.env = j.value("env", std::vector<std::string>{});
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
  RETURN_IF_ERROR(WriteAtomically(archive_path, [&](const UniqueFd& fd) { return CopyArchive(archive, fd); }));
  // The record last: a snapshot without one is not listed (nor counted twice).
  const std::string text = ToJson(record).dump();
  if (auto s = WriteAtomically(record_path, [&](const UniqueFd& fd) { return WriteAll(fd, text, record_path); });
      !s.ok()) {
    unlink(archive_path.c_str());
    return s;
  }
  return record;
}

absl::StatusOr<SnapshotRecord> SnapshotStore::Get(const std::string& tenant, const std::string& id) const {
  ASSIGN_OR_RETURN(std::string path, PathOf(tenant, id, ".json"));
  ASSIGN_OR_RETURN(std::string text, ReadWhole(path, id));
  return FromJson(text, tenant);
}

absl::StatusOr<SnapshotArchive> SnapshotStore::OpenArchive(const std::string& tenant,
                                                           const std::string& id) const {
  ASSIGN_OR_RETURN(std::string path, PathOf(tenant, id, ".tar"));
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return NotFound(id);
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("stat ", path));
  return SnapshotArchive{std::move(fd), st.st_size};
}

std::vector<SnapshotRecord> SnapshotStore::List(const std::string& tenant) const {
  std::vector<SnapshotRecord> out;
  DIR* dir = opendir(TenantDir(tenant).c_str());
  if (dir == nullptr) return out;
  while (struct dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (!absl::EndsWith(name, ".json")) continue;
    auto record = Get(tenant, name.substr(0, name.size() - 5));
    if (record.ok() && !record->hibernation) out.push_back(*std::move(record));
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
      if (!absl::EndsWith(name, ".json")) continue;
      auto record = Get(tenant, name.substr(0, name.size() - 5));
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
    return absl::ErrnoToStatus(errno, absl::StrCat("removing ", record_path));
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
