// multipart/form-data bodies (RFC 7578), as E2B's SDKs upload files: each
// part's name, filename and content. MultipartReader takes a body in pieces
// as they come (out of an inflater, say) and hands each part's content on
// in pieces too, holding no more than a part's head and a delimiter's
// length at once; ParseMultipart splits a whole body.
#pragma once

#include <functional>
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

class MultipartReader {
 public:
  // What the reader calls, in order, for each part: `begin` with its name
  // and filename (content empty), `data` with its content in pieces, `end`.
  // An error from any of them stops the reader with that error.
  struct Sink {
    std::function<absl::Status(const FormPart& head)> begin;
    std::function<absl::Status(absl::string_view piece)> data;
    std::function<absl::Status()> end;
  };
  MultipartReader(std::string boundary, Sink sink, size_t max_parts = 1000);

  // The body's next bytes. InvalidArgument (saying what is wrong) for a
  // malformed body; once an error is returned, every later call returns it.
  absl::Status Feed(absl::string_view bytes);
  // The body ended: InvalidArgument unless its closing delimiter came.
  absl::Status Finish();

 private:
  enum class State { kPreamble, kAfterDelimiter, kHead, kContent, kDone };
  // Takes what it can from the front of `rest`: *used bytes of it.
  absl::Status Step(absl::string_view rest, size_t* used, bool* progressed);

  const std::string delimiter_;  // "--" + boundary
  const Sink sink_;
  const size_t max_parts_;
  State state_ = State::kPreamble;
  std::string buffer_;  // bytes not yet handed on
  size_t parts_ = 0;
  absl::Status status_;
};

// Splits a whole `body`; InvalidArgument (saying what is wrong) on a
// malformed one. At most `max_parts` parts.
absl::StatusOr<std::vector<FormPart>> ParseMultipart(absl::string_view body, absl::string_view boundary,
                                                     size_t max_parts = 1000);

}  // namespace warden::e2b
