// ExtractImageArchive: an image that arrives as one file - an OCI image
// layout packed as a tar (`skopeo copy ... oci-archive:`, `buildah push
// oci-archive:`) or what `docker save` writes, either optionally gzip'd -
// unpacked into a directory for ReadImageSource. Only directories, regular
// files and symlinks that stay inside are accepted; anything else, a ".."
// path or more than `max_bytes` is an error.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace warden::images {

// `archive_fd` is read to its end; `dest` is an existing empty directory.
// `progress` (may be empty) gets the bytes read so far, now and then.
absl::Status ExtractImageArchive(int archive_fd, const std::string& dest, int64_t max_bytes,
                                 const std::function<void(int64_t)>& progress = nullptr);

}  // namespace warden::images
