// ImageSource: one image of an OCI image layout or a `docker save`
// directory, as the store imports it: its config (what a sandbox of it
// runs with) and its layers, bottom first, each a blob file in the layout.
//
// Nothing here trusts the layout: every JSON document is bounded and
// parsed strictly, every blob path is the layout's own blobs/ path of a
// validated digest (never a name from the JSON), and layers are verified
// against their digests when they are unpacked (layer_unpacker.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "images/digest.h"

namespace warden::images {

// The image config's "config" object (the image-spec's config.md): what a
// container of it starts with.
struct ImageConfig {
  std::vector<std::string> env;  // "KEY=value"
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string working_dir;
  std::string user;  // "name", "uid", "uid:gid", "name:group"; empty: root
  std::map<std::string, std::string> labels;
};

struct LayerRef {
  std::string blob_path;   // absolute path of the blob in the layout
  std::string media_type;  // as the manifest says (compression is detected, not trusted)
  Digest digest;           // of the blob as stored (compressed)
  Digest diff_id;          // of the uncompressed tar, from the config's rootfs.diff_ids
  int64_t size = 0;        // the blob's size, as the manifest says
};

struct ImageSource {
  enum class Format { kOciLayout, kDockerSave };
  Format format = Format::kOciLayout;
  std::string ref;        // the name the layout gave the image ("" if none)
  Digest config_digest;   // the image's id, as Docker shows it
  std::string config_json;  // the config blob, verbatim (its digest checked)
  std::string manifest_json;  // an OCI manifest of it (synthesised for docker save)
  Digest manifest_digest;
  ImageConfig config;
  std::vector<LayerRef> layers;  // bottom first
  std::string os, architecture;
};

// Reads `dir`, an OCI image layout (oci-layout, index.json, blobs/) or what
// `docker save` writes (manifest.json, <id>.json, <layer>/layer.tar; newer
// Docker writes both, and the OCI layout is read then). `ref` picks an image
// by its name (org.opencontainers.image.ref.name, or a RepoTag); empty: the
// only image there (an error if there are several). Multi-platform indexes
// yield their linux/amd64 image.
absl::StatusOr<ImageSource> ReadImageSource(const std::string& dir, const std::string& ref = "");

// Parses an image config blob (config.md): the runtime config and the
// layers' DiffIDs.
absl::Status ParseImageConfig(const std::string& json, ImageConfig* config, std::vector<Digest>* diff_ids,
                              std::string* os, std::string* architecture);

// The largest JSON document (index, manifest, config) read from a layout.
inline constexpr int64_t kMaxJsonBytes = 4 << 20;
// The most layers an image may have (Docker's own limit is 127).
inline constexpr size_t kMaxLayers = 256;

}  // namespace warden::images
