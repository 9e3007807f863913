// Test images: OCI image layouts and `docker save` directories made from
// entries a test lays out, written with libarchive (what real tools write:
// pax tars, gzip or zstd). Tests only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "images/image_source.h"

namespace warden::images::testing {

struct TarEntry {
  enum class Type { kFile, kDir, kSymlink, kHardlink, kCharDevice, kBlockDevice, kFifo };
  Type type = Type::kFile;
  std::string path;     // as written into the tar, verbatim ("../x" included)
  std::string content;  // kFile
  std::string link;     // kSymlink's target, kHardlink's target path
  mode_t mode = 0644;
  uid_t uid = 0;
  gid_t gid = 0;
  int64_t mtime = 1'700'000'000;
};

TarEntry File(std::string path, std::string content, mode_t mode = 0644, uid_t uid = 0, gid_t gid = 0);
TarEntry Dir(std::string path, mode_t mode = 0755, uid_t uid = 0, gid_t gid = 0);
TarEntry Symlink(std::string path, std::string target);
TarEntry Hardlink(std::string path, std::string target);
TarEntry Whiteout(const std::string& path);       // ".wh.<name>" beside it
TarEntry OpaqueMarker(const std::string& dir);   // "<dir>/.wh..wh..opq"

struct LayerSpec {
  std::vector<TarEntry> entries;
  enum class Compression { kNone, kGzip, kZstd } compression = Compression::kGzip;
};

struct ImageSpec {
  std::vector<LayerSpec> layers;
  ImageConfig config;
  std::string ref;  // the ref name in index.json (or RepoTag)
  std::string architecture = "amd64";
};

// The layer's blob (compressed as asked) and its DiffID source (the tar).
struct LayerBlob {
  std::string blob;
  std::string tar;
};
absl::StatusOr<LayerBlob> MakeLayer(const LayerSpec& layer);

// Writes the images as one OCI image layout in `dir` (created).
absl::Status WriteOciLayout(const std::string& dir, const std::vector<ImageSpec>& images);
// Writes the image as `docker save` (before Docker 25) lays it out.
absl::Status WriteDockerSave(const std::string& dir, const ImageSpec& image);
// Packs a directory's files into a tar (optionally gzip'd) at `archive`.
absl::Status TarDirectory(const std::string& dir, const std::string& archive, bool gzip = false);

}  // namespace warden::images::testing
