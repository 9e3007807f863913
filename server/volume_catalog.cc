#include "server/volume_catalog.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace warden {

absl::StatusOr<std::unique_ptr<VolumeCatalog>> VolumeCatalog::Create(const DaemonOptions& options) {
  images::VolumeStore::Options store;
  store.dir = options.VolumeDirectory();
  store.shared = options.fleet.enabled();
  auto opened = images::VolumeStore::Open(store);
  if (!opened.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the volume store ", store.dir, " cannot be opened: ",
                                                      opened.status().message(),
                                                      " (set volumes.dir to a directory wardend may use)"));
  }
  return std::unique_ptr<VolumeCatalog>(new VolumeCatalog(options.volumes, *std::move(opened)));
}

absl::StatusOr<images::VolumeInfo> VolumeCatalog::CreateVolume(const std::string& tenant, const std::string& name,
                                                               int64_t max_bytes, int64_t max_files) {
  if (max_bytes < 0 || max_files < 0) return absl::InvalidArgumentError("a volume's quota must not be negative");
  if (max_bytes == 0) max_bytes = options_.default_bytes;
  if (max_files == 0) max_files = options_.default_files;
  if (max_bytes > options_.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a volume holds at most ", options_.max_bytes >> 20,
                                                   " MiB here (volumes.max_bytes); asked for ", max_bytes >> 20));
  }
  if (max_files > options_.max_files) {
    return absl::InvalidArgumentError(absl::StrCat("a volume holds at most ", options_.max_files,
                                                   " files here (volumes.max_files); asked for ", max_files));
  }
  return store_->Create(tenant, name, max_bytes, max_files,
                        {.max_bytes = options_.max_bytes_per_tenant, .max_count = options_.max_per_tenant});
}

absl::StatusOr<VolumeCatalog::Attached> VolumeCatalog::Attach(const std::string& tenant,
                                                              const std::vector<VolumeMountRecord>& mounts) {
  if (static_cast<int>(mounts.size()) > options_.max_mounts) {
    return absl::InvalidArgumentError(absl::StrCat("a session mounts at most ", options_.max_mounts,
                                                   " volumes (volumes.max_mounts)"));
  }
  Attached out;
  std::set<std::string> paths;
  for (const VolumeMountRecord& mount : mounts) {
    RETURN_IF_ERROR(ValidateSandboxPath(mount.path));
    if (!paths.insert(mount.path).second) {
      return absl::InvalidArgumentError(absl::StrCat("two volumes are mounted at ", mount.path));
    }
    auto mounted = store_->Mount(tenant, mount.volume);
    if (!mounted.ok()) {
      if (absl::IsNotFound(mounted.status())) {
        return absl::NotFoundError(absl::StrCat("there is no volume '", mount.volume, "'; create it first"));
      }
      return mounted.status();
    }
    BindMount bind;
    bind.source = absl::StrCat("volume ", mount.volume);
    bind.target = mount.path;
    bind.writable = !mount.read_only;
    bind.source_fd = (*mounted)->fd();
    bind.idmap = BindMount::Idmap::kRequired;
    out.binds.push_back(std::move(bind));
    out.holds.push_back(*std::move(mounted));
  }
  return out;
}

}  // namespace warden
