// UnpackLayer: one OCI layer (a tar, compressed or not) unpacked into a
// directory of its own, its "tree", the way the image-spec's layer.md says a
// layer changes what lies below it - except for what a directory cannot
// hold, which goes into LayerMeta: the whiteouts and opaque directories
// (applied to the layers below when layers are merged, rootfs_merge.h) and
// hard links to files of lower layers.
//
// Handled as Docker does: ownership, modes (setuid and sticky bits kept:
// sandboxes mount everything nosuid), modification times, symlinks (kept as
// they are, wherever they point: they resolve inside the sandbox's own root),
// hard links, FIFOs, sparse files, user.* extended attributes; paths whose
// parents are symlinks resolve within the tree (Docker extracts inside a
// chroot). Refused: any path with a ".." component (the whole layer, as
// Docker's "breakout" check does). Left out and reported: device files
// (sandboxes get Warden's own /dev), sockets, and extended attributes other
// than user.* (file capabilities, SELinux labels). The blob and the tar are
// checked against their digests as they stream.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "images/digest.h"

namespace warden::images {

struct LayerMeta {
  Digest diff_id;
  // Digests of the compressed blobs known to hold this layer (a layer
  // pushed with two compressions has two).
  std::vector<Digest> blob_digests;
  std::vector<std::string> whiteouts;    // paths (relative) removed from below
  std::vector<std::string> opaque_dirs;  // directories whose lower content is hidden
  // Hard links whose target is not in this layer: name -> target.
  std::vector<std::pair<std::string, std::string>> links;
  // Parent directories the tar did not list: they do not change the
  // metadata of the same directory below.
  std::vector<std::string> implicit_dirs;
  std::map<std::string, std::string> left_out;  // path -> why
  int64_t bytes = 0;  // file content unpacked
  int64_t entries = 0;

  std::string ToJson() const;
  static absl::StatusOr<LayerMeta> FromJson(const std::string& json);
};

struct UnpackOptions {
  // Refused beyond these (the store's quota, a bound on metadata work).
  int64_t max_bytes = int64_t{64} << 30;
  int64_t max_entries = 4'000'000;
  // Set owners as the tar says (needs root); otherwise files are the
  // caller's own.
  bool set_owners = true;
  // Called now and then with the compressed bytes read so far.
  std::function<void(int64_t)> progress;
};

// Unpacks the blob read from `blob_fd` into the empty directory `tree_fd`.
// `blob_digest` is checked against the blob's bytes, `diff_id` against the
// uncompressed tar (either may be empty: not checked). A mismatch, a refused
// path or a damaged archive is an error; the tree is then the caller's to
// remove.
absl::StatusOr<LayerMeta> UnpackLayer(int blob_fd, int tree_fd, const Digest& blob_digest, const Digest& diff_id,
                                      const UnpackOptions& options);

// Reads a blob through its decompression and hashes the uncompressed
// stream, without unpacking: the DiffID of a layer blob (for a blob whose
// layer is already unpacked, under another compression).
absl::StatusOr<Digest> DiffIdOf(int blob_fd, const Digest& blob_digest);

// A tar entry's name as a path relative to the root: leading "/" and "./"
// dropped, "." and empty components dropped; ".." is an error. "" names
// the root itself.
absl::StatusOr<std::string> NormalizeEntryPath(const std::string& name);

}  // namespace warden::images
