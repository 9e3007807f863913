// multipart/form-data bodies (RFC 7578), as E2B's SDKs upload files: the
// parts of a body already read and bounded by the HTTP front. Only what a
// file upload needs: each part's name, filename and content.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden::e2b {

struct FormPart {
  std::string name;      // the form field, e.g. "file"
  std::string filename;  // as sent; may be empty
  std::string content;
};

// The boundary from a Content-Type such as
// `multipart/form-data; boundary=----x`, or InvalidArgument.
absl::StatusOr<std::string> MultipartBoundary(absl::string_view content_type);
// Splits `body`; InvalidArgument (saying what is wrong) on a malformed one.
// At most `max_parts` parts.
absl::StatusOr<std::vector<FormPart>> ParseMultipart(absl::string_view body, absl::string_view boundary,
                                                     size_t max_parts = 1000);

}  // namespace warden::e2b
