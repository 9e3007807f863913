#include "fronts/jupyter/wire.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace warden::jupyter {
namespace {

// channel, header, parent_header, metadata, content, and an end offset.
constexpr uint64_t kV1MinOffsets = 6;
// Buffers are rare (widgets); a frame claiming thousands is not a client.
constexpr uint64_t kV1MaxOffsets = 64;

uint64_t ReadLe64(absl::string_view bytes, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

void AppendLe64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

absl::StatusOr<nlohmann::json> ParseObject(absl::string_view text, absl::string_view what) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON"));
  if (value.is_null()) value = nlohmann::json::object();  // parent_header may be null
  if (!value.is_object()) return absl::InvalidArgumentError(absl::StrCat(what, " must be a JSON object"));
  return value;
}

std::string DefaultChannel(const std::string& msg_type) {
  return msg_type == "interrupt_request" || msg_type == "shutdown_request" ? "control" : "shell";
}

absl::Status CheckHeader(const Message& m) {
  if (!m.header.contains("msg_type") || !m.header["msg_type"].is_string() ||
      m.header["msg_type"].get<std::string>().empty()) {
    return absl::InvalidArgumentError("the message's header has no msg_type");
  }
  if (m.header.contains("msg_id") && !m.header["msg_id"].is_string()) {
    return absl::InvalidArgumentError("the message's header.msg_id must be a string");
  }
  return absl::OkStatus();
}

absl::StatusOr<Message> DecodeJson(absl::string_view frame) {
  nlohmann::json value = nlohmann::json::parse(frame, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) {
    return absl::InvalidArgumentError("the frame is not a JSON object (a Jupyter message)");
  }
  Message m;
  auto take_object = [&](const char* key, nlohmann::json& into) -> absl::Status {
    if (!value.contains(key) || value[key].is_null()) return absl::OkStatus();
    if (!value[key].is_object()) return absl::InvalidArgumentError(absl::StrCat("'", key, "' must be an object"));
    into = std::move(value[key]);
    return absl::OkStatus();
  };
  if (!value.contains("header")) return absl::InvalidArgumentError("the message has no header");
  for (auto [key, into] : {std::pair{"header", &m.header}, std::pair{"parent_header", &m.parent_header},
                           std::pair{"metadata", &m.metadata}, std::pair{"content", &m.content}}) {
    if (absl::Status s = take_object(key, *into); !s.ok()) return s;
  }
  if (absl::Status s = CheckHeader(m); !s.ok()) return s;
  if (value.contains("channel") && value["channel"].is_string()) {
    m.channel = value["channel"].get<std::string>();
  } else {
    m.channel = DefaultChannel(m.msg_type());
  }
  return m;
}

absl::StatusOr<Message> DecodeV1(absl::string_view frame) {
  if (frame.size() < 8) return absl::InvalidArgumentError("the binary frame is shorter than its offset count");
  const uint64_t n = ReadLe64(frame, 0);
  if (n < kV1MinOffsets || n > kV1MaxOffsets) {
    return absl::InvalidArgumentError(
        absl::StrCat("the binary frame claims ", n, " offsets; v1.kernel.websocket.jupyter.org has 6 or more"));
  }
  if (frame.size() < 8 * (n + 1)) return absl::InvalidArgumentError("the binary frame ends inside its offsets");
  std::vector<uint64_t> offsets(n);
  for (uint64_t i = 0; i < n; ++i) {
    offsets[i] = ReadLe64(frame, 8 * (i + 1));
    const uint64_t floor = i == 0 ? 8 * (n + 1) : offsets[i - 1];
    if (offsets[i] < floor || offsets[i] > frame.size()) {
      return absl::InvalidArgumentError("the binary frame's offsets are out of order or past its end");
    }
  }
  auto part = [&](size_t i) { return frame.substr(offsets[i], offsets[i + 1] - offsets[i]); };
  Message m;
  m.channel = std::string(part(0));
  auto header = ParseObject(part(1), "header");
  if (!header.ok()) return header.status();
  auto parent = ParseObject(part(2), "parent_header");
  if (!parent.ok()) return parent.status();
  auto metadata = ParseObject(part(3), "metadata");
  if (!metadata.ok()) return metadata.status();
  auto content = ParseObject(part(4), "content");
  if (!content.ok()) return content.status();
  m.header = *std::move(header);
  m.parent_header = *std::move(parent);
  m.metadata = *std::move(metadata);
  m.content = *std::move(content);
  for (size_t i = 5; i + 1 < n; ++i) m.buffers.emplace_back(part(i));
  if (absl::Status s = CheckHeader(m); !s.ok()) return s;
  if (m.channel.empty()) m.channel = DefaultChannel(m.msg_type());
  return m;
}

}  // namespace

std::string Message::msg_type() const {
  auto it = header.find("msg_type");
  return it != header.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string Message::msg_id() const {
  auto it = header.find("msg_id");
  return it != header.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<Message> DecodeFrame(absl::string_view frame, WireFormat format) {
  return format == WireFormat::kV1 ? DecodeV1(frame) : DecodeJson(frame);
}

std::string EncodeFrame(const Message& m, WireFormat format) {
  if (format == WireFormat::kJson) {
    nlohmann::json value = {
        {"header", m.header},   {"parent_header", m.parent_header}, {"metadata", m.metadata},
        {"content", m.content}, {"channel", m.channel},             {"buffers", nlohmann::json::array()},
        {"msg_type", m.msg_type()}, {"msg_id", m.msg_id()},
    };
    return DumpJson(value);
  }
  std::vector<std::string> parts = {m.channel, DumpJson(m.header), DumpJson(m.parent_header),
                                    DumpJson(m.metadata), DumpJson(m.content)};
  for (const std::string& b : m.buffers) parts.push_back(b);
  const uint64_t n = parts.size() + 1;
  std::string out;
  AppendLe64(out, n);
  uint64_t offset = 8 * (n + 1);
  AppendLe64(out, offset);
  for (const std::string& p : parts) {
    offset += p.size();
    AppendLe64(out, offset);
  }
  for (const std::string& p : parts) out += p;
  return out;
}

WireFormat ChooseWireFormat(absl::string_view offered) {
  for (absl::string_view p : absl::StrSplit(offered, ',')) {
    if (absl::StripAsciiWhitespace(p) == kV1Subprotocol) return WireFormat::kV1;
  }
  return WireFormat::kJson;
}

}  // namespace warden::jupyter
