#include "server/json_log.h"

#include <cstdio>
#include <string>

namespace warden {
namespace {

// %j: the message, escaped for a JSON string (RFC 8259).
class JsonEscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    for (char c : msg.payload) {
      switch (c) {
        case '"': Append(dest, "\\\""); break;
        case '\\': Append(dest, "\\\\"); break;
        case '\n': Append(dest, "\\n"); break;
        case '\r': Append(dest, "\\r"); break;
        case '\t': Append(dest, "\\t"); break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char escaped[8];
            snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
            Append(dest, escaped);
          } else {
            dest.push_back(c);
          }
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }

 private:
  static void Append(spdlog::memory_buf_t& dest, const char* text) {
    dest.append(text, text + std::char_traits<char>::length(text));
  }
};

}  // namespace

std::unique_ptr<spdlog::formatter> JsonLogFormatter() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<JsonEscapedMessage>('j').set_pattern(
      R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","msg":"%j"})");
  return formatter;
}

}  // namespace warden
