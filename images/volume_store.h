// VolumeStore: tenants' volumes - named directory trees that outlive the
// sandboxes that mount them (docs/templates.md, "Volumes").
//
// Each volume is an ext4 file system in a sparse image file of its own,
// mounted through a loop device by wardend (never in the host's mount
// table: a detached mount, fsmount(2), that sandboxes bind from): its quota
// is the file system's size and inode count, so a full volume is ENOSPC to
// whoever writes, with no accounting to race. Files are stored with the
// sandbox user's ids (1000) and seen through idmapped mounts, so every
// sandbox that mounts a volume owns its files, whichever host ids it runs
// as. On shared storage (a fleet) the images carry ext4's multi-mount
// protection: a second host cannot mount a volume another has mounted.
//
// On disk, beneath the store's directory (0700):
//   tenants/<tenant>/<name>.json  the volume's record
//   tenants/<tenant>/<name>.img   its file system
// Thread-safe; several processes may share the store (each volume's image
// is flock'd while it is being mounted, and one loop device serves them all).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "sandbox/unique_fd.h"

namespace warden::images {

// The ids a volume's files get on disk unless asked otherwise: the
// sandboxes' user (sandbox/seccomp_policy.h, kSandboxId).
inline constexpr uint32_t kVolumeOwner = 1000;

struct VolumeInfo {
  std::string name;
  std::string tenant;
  int64_t max_bytes = 0;
  int64_t max_files = 0;
  int64_t created_unix_ms = 0;
  // What an empty volume shows as used (the file system's own), left out
  // of VolumeUsage.
  int64_t base_bytes = 0;
  int64_t base_files = 0;

  std::string ToJson() const;
  static absl::StatusOr<VolumeInfo> FromJson(const std::string& json);
};

struct VolumeUsage {
  int64_t used_bytes = 0;
  int64_t used_files = 0;
};

// An entry of a volume, as its sandboxes see it.
struct VolumeEntry {
  std::string path;  // relative to the volume's root
  std::string name;
  char type = 'f';   // f, d, l, o
  int64_t size = 0;
  uint32_t mode = 0;
  uint32_t uid = 0, gid = 0;
  int64_t modified_unix_ms = 0, accessed_unix_ms = 0, changed_unix_ms = 0;
  std::string symlink_target;
};

// Owner and mode to give what is created (unset: kVolumeOwner, 0644/0755).
struct EntryAttributes {
  std::optional<uint32_t> uid, gid, mode;
};

class VolumeStore {
 public:
  struct Options {
    std::string dir;  // made if missing
    // The images live on storage other hosts mount too: ext4's multi-mount
    // protection (mmp) in every new image.
    bool shared = false;
    std::string mkfs = "/sbin/mkfs.ext4";
  };
  static absl::StatusOr<std::unique_ptr<VolumeStore>> Open(const Options& options);

  // A tenant's ceilings: the quotas its volumes reserve together, and how many.
  struct Ceilings {
    int64_t max_bytes = 0;  // 0: none
    int max_count = 0;
  };
  absl::StatusOr<VolumeInfo> Create(const std::string& tenant, const std::string& name, int64_t max_bytes,
                                    int64_t max_files, const Ceilings& ceilings);
  absl::StatusOr<VolumeInfo> Get(const std::string& tenant, const std::string& name) const;
  std::vector<VolumeInfo> List(const std::string& tenant) const;
  // FAILED_PRECONDITION while mounted (by a sandbox of any wardend here).
  absl::Status Delete(const std::string& tenant, const std::string& name);

  // A mounted volume: its detached mount, which sandboxes bind from and the
  // file operations below go through. Mounted on first use, shared by every
  // user in this process, unmounted when the last one lets go (sandboxes
  // keep their own reference to the file system, and the loop device goes
  // when the last of them does).
  class Mounted {
   public:
    ~Mounted();
    int fd() const { return mount_.get(); }  // the volume's root, a detached mount
    const VolumeInfo& info() const { return info_; }
    absl::StatusOr<VolumeUsage> Usage() const;

    // Paths are relative to the volume's root, without "..", never through
    // a symlink or onto another mount; "" is the root.
    absl::StatusOr<VolumeEntry> Write(const std::string& path, const std::function<absl::StatusOr<std::string>()>& next,
                                      bool make_parents, const EntryAttributes& attrs);
    // Calls `sink` with the file's content in chunks; the file's size first.
    absl::Status Read(const std::string& path, int64_t max_bytes,
                      const std::function<bool(const std::string& chunk, int64_t total)>& sink);
    absl::StatusOr<std::vector<VolumeEntry>> List(const std::string& path, int depth, size_t max_entries);
    absl::StatusOr<VolumeEntry> Stat(const std::string& path);
    absl::StatusOr<VolumeEntry> MakeDirectory(const std::string& path, bool make_parents, const EntryAttributes& attrs);
    absl::Status Remove(const std::string& path);
    absl::StatusOr<VolumeEntry> SetAttributes(const std::string& path, const EntryAttributes& attrs);

   private:
    friend class VolumeStore;
    Mounted() = default;
    VolumeInfo info_;
    UniqueFd mount_;
  };
  absl::StatusOr<std::shared_ptr<Mounted>> Mount(const std::string& tenant, const std::string& name);
  // True if this process has the volume mounted now.
  bool MountedHere(const std::string& tenant, const std::string& name) const;

  // [A-Za-z0-9][A-Za-z0-9._-]{0,62}
  static absl::Status CheckName(const std::string& name);

 private:
  explicit VolumeStore(Options options) : options_(std::move(options)) {}
  std::string RecordPath(const std::string& tenant, const std::string& name) const;
  std::string ImagePath(const std::string& tenant, const std::string& name) const;

  const Options options_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::weak_ptr<Mounted>> mounted_ ABSL_GUARDED_BY(mu_);  // by "tenant/name"
};

// "a/b" checked as a volume path: relative, no "..", no empty component.
absl::Status CheckVolumePath(const std::string& path);

}  // namespace warden::images
