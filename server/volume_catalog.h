// VolumeCatalog: the volume store (images/volume_store.h) as wardend uses
// it - the operator's defaults and ceilings, and each session's volumes as
// binds of its sandbox (idmapped: the files are the sandbox user's).
// Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "images/volume_store.h"
#include "sandbox/mount_plan.h"
#include "server/options.h"
#include "server/snapshot_store.h"

namespace warden {

class VolumeCatalog {
 public:
  // volumes.dir (in a fleet: the shared storage's, with multi-mount
  // protection).
  static absl::StatusOr<std::unique_ptr<VolumeCatalog>> Create(const DaemonOptions& options);

  // 0: volumes.default_bytes / default_files; above the maximum: refused.
  absl::StatusOr<images::VolumeInfo> CreateVolume(const std::string& tenant, const std::string& name, int64_t max_bytes,
                                                  int64_t max_files);
  absl::StatusOr<images::VolumeInfo> Get(const std::string& tenant, const std::string& name) const {
    return store_->Get(tenant, name);
  }
  std::vector<images::VolumeInfo> List(const std::string& tenant) const { return store_->List(tenant); }
  absl::Status Delete(const std::string& tenant, const std::string& name) { return store_->Delete(tenant, name); }
  absl::StatusOr<std::shared_ptr<images::VolumeStore::Mounted>> Mount(const std::string& tenant,
                                                                     const std::string& name) {
    return store_->Mount(tenant, name);
  }

  // Checks a session's mounts (how many, where) and mounts each: the binds
  // its sandbox gets, and what keeps the volumes mounted meanwhile.
  struct Attached {
    std::vector<BindMount> binds;
    std::vector<std::shared_ptr<void>> holds;
  };
  absl::StatusOr<Attached> Attach(const std::string& tenant, const std::vector<VolumeMountRecord>& mounts);

  const VolumesOptions& options() const { return options_; }

 private:
  VolumeCatalog(const VolumesOptions& options, std::unique_ptr<images::VolumeStore> store)
      : options_(options), store_(std::move(store)) {}
  const VolumesOptions options_;
  std::unique_ptr<images::VolumeStore> store_;
};

}  // namespace warden
