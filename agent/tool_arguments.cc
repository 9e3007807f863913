#include "agent/tool_arguments.h"

#include "absl/strings/str_format.h"

namespace warden::agent {

std::string EscapeControlCharactersInStrings(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (in_string && byte < 0x20) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default: out += absl::StrFormat("\\u%04x", byte);
      }
      escaped = false;
      continue;
    }
    out += c;
    if (!in_string) {
      in_string = c == '"';
    } else if (escaped) {
      escaped = false;
    } else if (c == '\\') {
      escaped = true;
    } else if (c == '"') {
      in_string = false;
    }
  }
  return out;
}

nlohmann::json ParseToolArguments(std::string_view text) {
  nlohmann::json strict = nlohmann::json::parse(text, nullptr, false);
  if (!strict.is_discarded()) return strict;
  return nlohmann::json::parse(EscapeControlCharactersInStrings(text), nullptr, false);
}

}  // namespace warden::agent
