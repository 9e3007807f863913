#include "fronts/e2b/multipart.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace warden::e2b {
namespace {

// A part's head (its header lines) is small; one larger is not a form's.
constexpr size_t kMaxHeadBytes = 16 << 10;

// The value of `key=` in a header's parameters: `form-data; name="file"`.
std::string Parameter(absl::string_view header, absl::string_view key) {
  for (absl::string_view piece : absl::StrSplit(header, ';')) {
    piece = absl::StripAsciiWhitespace(piece);
    if (!absl::StartsWithIgnoreCase(piece, absl::StrCat(key, "="))) continue;
    piece.remove_prefix(key.size() + 1);
    if (piece.size() >= 2 && piece.front() == '"' && piece.back() == '"') {
      piece = piece.substr(1, piece.size() - 2);
    }
    return std::string(piece);
  }
  return "";
}

}  // namespace

absl::StatusOr<std::string> MultipartBoundary(absl::string_view content_type) {
  if (!absl::StartsWithIgnoreCase(absl::StripLeadingAsciiWhitespace(content_type), "multipart/form-data")) {
    return absl::InvalidArgumentError(
        "upload the file as multipart/form-data (field \"file\") or application/octet-stream");
  }
  std::string boundary = Parameter(content_type, "boundary");
  if (boundary.empty() || boundary.size() > 200) {
    return absl::InvalidArgumentError("the multipart/form-data Content-Type has no usable boundary");
  }
  return boundary;
}

MultipartReader::MultipartReader(std::string boundary, Sink sink, size_t max_parts)
    : delimiter_(absl::StrCat("--", boundary)), sink_(std::move(sink)), max_parts_(max_parts) {}

absl::Status MultipartReader::Feed(absl::string_view bytes) {
  if (!status_.ok()) return status_;
  if (state_ == State::kDone) return absl::OkStatus();  // the epilogue, ignored
  // The bytes are read where they are; only what is left over (a head or a
  // delimiter cut in two) is kept for the next call.
  if (!buffer_.empty()) {
    buffer_.append(bytes.data(), bytes.size());
    bytes = buffer_;
  }
  size_t pos = 0;
  for (bool progressed = true; progressed && status_.ok() && state_ != State::kDone;) {
    progressed = false;
    size_t used = 0;
    status_ = Step(bytes.substr(pos), &used, &progressed);
    pos += used;
  }
  const std::string rest = state_ == State::kDone ? std::string() : std::string(bytes.substr(pos));
  buffer_ = rest;
  return status_;
}

absl::Status MultipartReader::Step(absl::string_view rest, size_t* used, bool* progressed) {
  switch (state_) {
    case State::kPreamble: {
      const size_t at = rest.find(delimiter_);
      if (at == absl::string_view::npos) {
        // Keep only what could still begin the delimiter.
        if (rest.size() >= delimiter_.size()) *used = rest.size() - delimiter_.size() + 1;
        return absl::OkStatus();
      }
      *used = at + delimiter_.size();
      state_ = State::kAfterDelimiter;
      *progressed = true;
      return absl::OkStatus();
    }
    case State::kAfterDelimiter: {
      if (rest.size() < 2) return absl::OkStatus();
      if (rest.substr(0, 2) == "--") {  // the closing delimiter
        state_ = State::kDone;
        *used = rest.size();
        *progressed = true;
        return absl::OkStatus();
      }
      if (rest.substr(0, 2) != "\r\n") return absl::InvalidArgumentError("malformed multipart delimiter line");
      *used = 2;
      state_ = State::kHead;
      *progressed = true;
      return absl::OkStatus();
    }
    case State::kHead: {
      const size_t head_end = rest.substr(0, kMaxHeadBytes + 4).find("\r\n\r\n");
      if (head_end == absl::string_view::npos) {
        if (rest.size() > kMaxHeadBytes) {
          return absl::InvalidArgumentError("a multipart part has no end of headers");
        }
        return absl::OkStatus();
      }
      FormPart part;
      for (absl::string_view line : absl::StrSplit(rest.substr(0, head_end), "\r\n")) {
        const size_t colon = line.find(':');
        if (colon == absl::string_view::npos) continue;
        if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(line.substr(0, colon)), "content-disposition")) {
          part.name = Parameter(line.substr(colon + 1), "name");
          part.filename = Parameter(line.substr(colon + 1), "filename");
        }
      }
      if (++parts_ > max_parts_) {
        return absl::InvalidArgumentError(absl::StrCat("more than ", max_parts_, " parts in one upload"));
      }
      *used = head_end + 4;
      state_ = State::kContent;
      *progressed = true;
      return sink_.begin ? sink_.begin(part) : absl::OkStatus();
    }
    case State::kContent: {
      const std::string end = absl::StrCat("\r\n", delimiter_);
      const size_t at = rest.find(end);
      if (at == absl::string_view::npos) {
        // All but what could still begin the delimiter is content.
        if (rest.size() < end.size()) return absl::OkStatus();
        const size_t give = rest.size() - (end.size() - 1);
        *used = give;
        return sink_.data ? sink_.data(rest.substr(0, give)) : absl::OkStatus();
      }
      if (at > 0 && sink_.data) {
        if (absl::Status s = sink_.data(rest.substr(0, at)); !s.ok()) return s;
      }
      *used = at + end.size();
      state_ = State::kAfterDelimiter;
      *progressed = true;
      return sink_.end ? sink_.end() : absl::OkStatus();
    }
    case State::kDone:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status MultipartReader::Finish() {
  if (!status_.ok()) return status_;
  switch (state_) {
    case State::kDone: return absl::OkStatus();
    case State::kPreamble: return absl::InvalidArgumentError("the multipart body does not contain its boundary");
    case State::kHead: return absl::InvalidArgumentError("a multipart part has no end of headers");
    case State::kContent: return absl::InvalidArgumentError("a multipart part is not terminated");
    case State::kAfterDelimiter: return absl::InvalidArgumentError("malformed multipart delimiter line");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<FormPart>> ParseMultipart(absl::string_view body, absl::string_view boundary,
                                                     size_t max_parts) {
  std::vector<FormPart> parts;
  MultipartReader reader(
      std::string(boundary),
      {[&parts](const FormPart& head) {
         parts.push_back(head);
         return absl::OkStatus();
       },
       [&parts](absl::string_view piece) {
         parts.back().content.append(piece.data(), piece.size());
         return absl::OkStatus();
       },
       [] { return absl::OkStatus(); }},
      max_parts);
  if (absl::Status s = reader.Feed(body); !s.ok()) return s;
  if (absl::Status s = reader.Finish(); !s.ok()) return s;
  return parts;
}

}  // namespace warden::e2b
