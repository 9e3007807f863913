// Gunzip: a gzip body (Content-Encoding: gzip, as E2B's SDKs upload files
// with `gzip: true`) inflated with zlib, never past a bound, and handed on
// in pieces as it inflates: a compressed bomb costs one piece of memory
// (kGunzipPiece) however far it inflates, and is stopped at the bound.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden::e2b {

inline constexpr size_t kGunzipPiece = 256 << 10;

// Inflates `data` (one or more gzip members), calling `sink` with each
// piece of at most kGunzipPiece bytes, in order. InvalidArgument for
// anything that is not gzip and once the output passes `max_bytes` (saying
// `what` the bound is); a sink's error stops it with that error.
absl::Status GunzipTo(absl::string_view data, size_t max_bytes, absl::string_view what,
                      const std::function<absl::Status(absl::string_view piece)>& sink);

// The inflated bytes of `data` whole, as GunzipTo.
absl::StatusOr<std::string> Gunzip(absl::string_view data, size_t max_bytes);

}  // namespace warden::e2b
