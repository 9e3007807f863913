// SseParser: server-sent events (the text/event-stream framing that
// OpenAI-compatible servers stream chat completions in) from bytes as they
// arrive, in any split. Only `data:` fields matter here; an event is
// complete at its blank line.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace warden::agent {

class SseParser {
 public:
  // Returns the data of every event completed by `bytes` ("[DONE]" included).
  std::vector<std::string> Feed(absl::string_view bytes);
  // An event whose blank line never came (the stream ended); empty if none.
  std::string Flush();

 private:
  void TakeLine(absl::string_view line, std::vector<std::string>* out);

  std::string pending_;  // an incomplete line
  std::string data_;     // the current event's data lines, joined by '\n'
  bool has_data_ = false;
};

}  // namespace warden::agent
