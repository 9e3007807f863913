#include "fronts/e2b/multipart.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace warden::e2b {
namespace {

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

absl::StatusOr<std::vector<FormPart>> ParseMultipart(absl::string_view body, absl::string_view boundary,
                                                     size_t max_parts) {
  const std::string delimiter = absl::StrCat("--", boundary);
  std::vector<FormPart> parts;
  size_t pos = body.find(delimiter);
  if (pos == absl::string_view::npos) {
    return absl::InvalidArgumentError("the multipart body does not contain its boundary");
  }
  pos += delimiter.size();
  for (;;) {
    if (body.substr(pos, 2) == "--") return parts;  // the closing delimiter
    if (body.substr(pos, 2) != "\r\n") return absl::InvalidArgumentError("malformed multipart delimiter line");
    pos += 2;
    const size_t head_end = body.find("\r\n\r\n", pos);
    if (head_end == absl::string_view::npos) return absl::InvalidArgumentError("a multipart part has no end of headers");
    FormPart part;
    for (absl::string_view line : absl::StrSplit(body.substr(pos, head_end - pos), "\r\n")) {
      const size_t colon = line.find(':');
      if (colon == absl::string_view::npos) continue;
      if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(line.substr(0, colon)), "content-disposition")) {
        part.name = Parameter(line.substr(colon + 1), "name");
        part.filename = Parameter(line.substr(colon + 1), "filename");
      }
    }
    const size_t content_start = head_end + 4;
    const size_t next = body.find(absl::StrCat("\r\n", delimiter), content_start);
    if (next == absl::string_view::npos) return absl::InvalidArgumentError("a multipart part is not terminated");
    part.content = std::string(body.substr(content_start, next - content_start));
    parts.push_back(std::move(part));
    if (parts.size() > max_parts) {
      return absl::InvalidArgumentError(absl::StrCat("more than ", max_parts, " parts in one upload"));
    }
    pos = next + 2 + delimiter.size();
  }
}

}  // namespace warden::e2b
