#include "agent/sse_parser.h"

#include "absl/strings/match.h"

namespace warden::agent {

std::vector<std::string> SseParser::Feed(absl::string_view bytes) {
  std::vector<std::string> out;
  pending_.append(bytes.data(), bytes.size());
  size_t start = 0;
  for (;;) {
    const size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    absl::string_view line(pending_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    TakeLine(line, &out);
    start = nl + 1;
  }
  pending_.erase(0, start);
  return out;
}

std::string SseParser::Flush() {
  std::vector<std::string> out;
  if (!pending_.empty()) {
    std::string line = std::move(pending_);
    pending_.clear();
    TakeLine(line, &out);
  }
  TakeLine("", &out);
  return out.empty() ? "" : out.back();
}

void SseParser::TakeLine(absl::string_view line, std::vector<std::string>* out) {
  if (line.empty()) {  // dispatch
    if (has_data_) out->push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // a comment (keep-alive)
  absl::string_view field = line, value;
  if (size_t colon = line.find(':'); colon != absl::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field != "data") return;  // event, id, retry: not used by chat completions
  if (has_data_) data_ += '\n';
  data_.append(value.data(), value.size());
  has_data_ = true;
}

}  // namespace warden::agent
