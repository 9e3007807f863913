// Gunzip: a gzip body (Content-Encoding: gzip, as E2B's SDKs upload files
// with `gzip: true`) inflated with zlib, never past a bound.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden::e2b {

// The inflated bytes of `data` (one or more gzip members); InvalidArgument
// for anything that is not gzip, and past `max_bytes` (a compressed bomb
// is stopped there, having cost at most that much).
absl::StatusOr<std::string> Gunzip(absl::string_view data, size_t max_bytes);

}  // namespace warden::e2b
