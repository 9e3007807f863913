// TemplateStore: sandboxes' root filesystems made from OCI images
// ("templates", as E2B calls them), kept in a content-addressed store on
// the host and shared between templates whose images share layers.
//
// On disk, beneath the store's directory (0700, root's):
//   layers/sha256/<DiffID>/tree     a layer unpacked (layer_unpacker.h),
//   layers/sha256/<DiffID>/meta.json  with what a directory cannot hold;
//   roots/sha256/<ChainID>/         the root filesystem of a layer stack:
//                                   hard links to the layers' files
//                                   (rootfs_merge.h), Warden's mount points;
//   blobs/sha256/<digest>           configs and manifests, as imported;
//   templates/public/<name>.json    a template every tenant may use;
//   templates/tenants/<t>/<name>.json  a template of tenant t alone;
//   pins/<id>                       what a live process still uses (flock'd);
//   tmp/                            work in progress, cleared on open.
// Layers and roots are written into tmp/ and renamed into place, so a crash
// leaves no half-made one; a template's record is written last. Roots and
// layers no template names and nothing pins are removed by Collect.
//
// Thread-safe. Several processes (the nodes of a fleet sharing the store)
// may use one store: the steps that decide what exists hold an flock.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "images/digest.h"
#include "images/image_source.h"
#include "images/layer_unpacker.h"

namespace warden::images {

struct TemplateLayer {
  Digest digest;   // the blob's, as imported
  Digest diff_id;
  std::string media_type;
  int64_t bytes = 0;  // unpacked
};

struct TemplateInfo {
  std::string name;
  std::string owner;  // the tenant; empty for a public template
  Digest digest;      // the image's config digest: its id (Docker's IMAGE ID)
  Digest manifest_digest;
  Digest root;        // the ChainID of its layers: its root filesystem
  std::string root_path;
  std::vector<TemplateLayer> layers;
  int64_t size_bytes = 0;  // unpacked, all its layers: what quotas count
  int64_t created_unix_ms = 0;
  std::string source_ref;  // the name the image had where it came from
  ImageConfig config;
  // What was left out of the image (device files, ...): path -> why.
  std::map<std::string, std::string> left_out;
  // The image's /etc/passwd and /etc/group (at most 256 KiB each), for the
  // ones sandboxes get.
  std::string passwd, group;
  // What the server found out about the template (its interpreters), as
  // it stored it: opaque here.
  std::string runtime;

  std::string ToJson() const;
  static absl::StatusOr<TemplateInfo> FromJson(const std::string& json);
};

// An owner's use of the store, by its templates' sizes.
struct TemplateUsage {
  int64_t bytes = 0;
  int count = 0;
};

struct ImportProgress {
  enum class Stage { kReading, kLayer, kMerging, kDone };
  Stage stage = Stage::kReading;
  int layer = 0;           // 1-based, for kLayer
  int layers = 0;
  bool reused = false;     // the layer (or, for kMerging, the root) was there already
  int64_t bytes_done = 0;  // of the layer's blob
  int64_t bytes_total = 0;
  std::string message;     // a line for a terminal
};

struct ImportRequest {
  std::string layout_dir;  // an OCI layout or a docker-save directory (image_source.h)
  std::string ref;         // which image of it; empty: the only one
  std::string name;        // the template's name
  std::string owner;       // tenant; empty: public
  // The owner's quota: what its templates may take together (bytes
  // unpacked, count); 0: no bound.
  int64_t max_bytes = 0;
  int max_count = 0;
  std::function<void(const ImportProgress&)> progress;
};

class TemplateStore {
 public:
  struct Options {
    std::string dir;  // created if missing
    // Set files' owners as the image says (root only); otherwise every file
    // is the store's user's.
    bool set_owners = true;
    // Mount points every root gets (AddMountPoints), relative to the root.
    std::vector<std::string> mount_point_dirs;
    std::vector<std::string> mount_point_files;
    // Work bounds of one import.
    int64_t max_image_bytes = int64_t{64} << 30;
    int64_t max_entries = 4'000'000;
  };
  static absl::StatusOr<std::unique_ptr<TemplateStore>> Open(const Options& options);

  // Imports an image as the template `name` of `owner` (replacing one of
  // that name). Layers already in the store are not unpacked again: their
  // blobs are only hashed (a layer is reused only for the bytes that made it).
  absl::StatusOr<TemplateInfo> Import(const ImportRequest& request);

  absl::StatusOr<TemplateInfo> Get(const std::string& owner, const std::string& name) const;
  // An owner's templates (empty owner: the public ones), by name.
  std::vector<TemplateInfo> List(const std::string& owner) const;
  // Removes the record; its root and layers go once nothing else uses them.
  absl::Status Remove(const std::string& owner, const std::string& name);
  absl::Status SetRuntime(const std::string& owner, const std::string& name, const std::string& runtime);
  TemplateUsage UsageOf(const std::string& owner) const;

  // Keeps a root from Collect while the pin lives (sandboxes use it); the
  // pin is a file the process holds locked, so a dead process's pins count
  // for nothing.
  class Pin;
  absl::StatusOr<std::shared_ptr<Pin>> PinRoot(const Digest& root);

  // Moves roots and layers that no template names and no pin holds out of
  // the store (into tmp/, at once), for PurgeGarbage to delete.
  absl::Status Collect();
  // Deletes what Collect moved out: slow on a disk that commits each
  // unlink of a freshly written file (minutes for a large image here), so
  // callers run it off their request's path.
  void PurgeGarbage();

  const std::string& dir() const { return options_.dir; }
  std::string RootPath(const Digest& root) const;
  std::string TmpDir() const { return options_.dir + "/tmp"; }

  // [A-Za-z0-9][A-Za-z0-9._-]{0,127}: a template's name.
  static absl::Status CheckName(const std::string& name);

 private:
  explicit TemplateStore(Options options) : options_(std::move(options)) {}
  std::string RecordPath(const std::string& owner, const std::string& name) const;
  std::string LayerPath(const Digest& diff_id) const;
  // The layer, unpacked if the store has it not; `blob_fd` is the blob.
  absl::StatusOr<LayerMeta> EnsureLayer(int layout_fd, const LayerRef& layer, int64_t* budget,
                                        const ImportRequest& request, int index, int count);
  absl::Status EnsureRoot(const Digest& chain, const std::vector<Digest>& diff_ids,
                          std::map<std::string, std::string>* left_out, bool* reused);
  // flock on the store's lock file, for the decisions several processes
  // must agree on.
  class Lock;

  const Options options_;
};

}  // namespace warden::images
