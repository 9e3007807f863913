// MergeLayers: a root filesystem from unpacked layers (layer_unpacker.h),
// bottom first, made of hard links to the layers' own files, so that roots
// of images that share layers share their files on disk. Directories are
// the root's own (their modes and owners from the topmost layer that lists
// them); files, symlinks and FIFOs are the layers' inodes, never written
// again. Whiteouts and opaque directories of a layer remove what the layers
// below put there before the layer's own entries are added, as overlayfs
// shows a layer stack.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "images/layer_unpacker.h"

namespace warden::images {

struct UnpackedLayer {
  std::string tree;  // absolute path of the layer's tree
  LayerMeta meta;
};

// Builds the root in `dest_fd` (an empty directory on the same file system
// as the trees). Hard links whose target is missing are reported in
// `left_out` (path -> why), as are whiteouts that cannot apply.
absl::Status MergeLayers(const std::vector<UnpackedLayer>& layers, int dest_fd, bool set_owners,
                         std::map<std::string, std::string>* left_out);

// Paths the sandboxes' mounts need in a root, made where missing (empty
// directories and files, root-owned, 0755 and 0644): `dirs` only where no
// entry of that name exists (the planner handles an image's own), `files`
// replacing whatever the image has there (Warden mounts its own over them).
// A path whose parent is not a plain directory is skipped.
absl::Status AddMountPoints(int root_fd, const std::vector<std::string>& dirs, const std::vector<std::string>& files);

}  // namespace warden::images
