// SnapshotStore: session snapshots on disk, one directory per tenant.
//
// A snapshot is an archive the kernel packed inside its sandbox (opaque
// bytes here: the host never unpacks or unpickles it) and a small JSON
// record beside it. Layout: <dir>/<hex of the tenant>/<id>.tar and
// <id>.json; directories 0700, files 0600, written to a temporary name and
// renamed, so a crash leaves either the whole snapshot or none. A tenant
// reaches only its own directory: another tenant's id is NOT_FOUND, exactly
// like an id that never existed. What one tenant holds is capped in bytes.
// The records survive restarts of wardend.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kernel/language.h"
#include "kernel/snapshot_archive.h"
#include "nlohmann/json.hpp"

namespace warden {

// A volume a session has mounted (CreateSessionRequest.volumes): recorded
// with its snapshots, mounted again where they are restored.
struct VolumeMountRecord {
  std::string volume;
  std::string path;  // absolute, inside the sandbox
  bool read_only = false;
  bool operator==(const VolumeMountRecord& o) const {
    return volume == o.volume && path == o.path && read_only == o.read_only;
  }
};

struct SnapshotRecord {
  std::string id;  // "snap-" + 24 hex digits
  std::string tenant;
  std::string session_id;  // taken from
  Language language = Language::kPython;
  absl::Time created;
  int64_t size_bytes = 0;
  int execution_count = 0;
  int64_t memory_mb = 0;  // the source session's, for restoring
  std::map<std::string, std::string> left_out;  // name -> why
  // Taken to hibernate `session_id`: not listed, deleted when it wakes.
  bool hibernation = false;
  // Hibernation and fleet handover: what the session needs besides its
  // state to live on elsewhere (server/session_ledger.h); opaque here.
  std::string session_meta;
  std::string name;  // the caller's, optional (E2B's snapshot names)
  // Taken from a session with a shared workspace: restored as one machine,
  // with its workspace (the kernel's archive holds its files) at
  // `workspace_path`, these aliases to it, and its sandbox-wide environment
  // ("KEY=value").
  bool shared_workspace = false;
  std::vector<std::string> workspace_aliases;
  std::string workspace_path;
  std::vector<std::string> env;
  // The template the session ran in (empty: the host's runtime): restored
  // only into a template with this digest.
  std::string template_name, template_digest;
  std::vector<VolumeMountRecord> volumes;
};

// The JSON form of a session's volume mounts (snapshot records, session
// metadata).
nlohmann::json VolumesToJson(const std::vector<VolumeMountRecord>& volumes);
std::vector<VolumeMountRecord> VolumesFromJson(const nlohmann::json& j);

class SnapshotStore {
 public:
  SnapshotStore(std::string dir, int64_t max_bytes_per_tenant)
      : dir_(std::move(dir)), max_bytes_per_tenant_(max_bytes_per_tenant) {}

  // Stores `archive` under a new id (set in the returned record, with its
  // size); RESOURCE_EXHAUSTED past the tenant's cap.
  absl::StatusOr<SnapshotRecord> Put(SnapshotRecord record, const SnapshotArchive& archive);
  absl::StatusOr<SnapshotRecord> Get(const std::string& tenant, const std::string& id) const;
  // The stored archive, open for reading; it stays readable after Delete
  // until closed.
  absl::StatusOr<SnapshotArchive> OpenArchive(const std::string& tenant, const std::string& id) const;
  // The tenant's snapshots, oldest first; hibernation snapshots left out.
  std::vector<SnapshotRecord> List(const std::string& tenant) const;
  // The newest hibernation snapshot of `session_id`, NOT_FOUND if none (a
  // fleet's node taking over a session its lost owner left hibernated).
  absl::StatusOr<SnapshotRecord> FindHibernation(const std::string& tenant, const std::string& session_id) const;
  absl::Status Delete(const std::string& tenant, const std::string& id);
  // Bytes the tenant's snapshots hold, hibernated sessions included.
  int64_t UsedBytes(const std::string& tenant) const;
  int64_t max_bytes_per_tenant() const { return max_bytes_per_tenant_; }

 private:
  std::string TenantDir(const std::string& tenant) const;
  absl::StatusOr<std::string> PathOf(const std::string& tenant, const std::string& id,
                                     const char* suffix) const;

  const std::string dir_;
  const int64_t max_bytes_per_tenant_;
  mutable absl::Mutex mu_;  // Put's check-and-write of a tenant's quota
};

}  // namespace warden
