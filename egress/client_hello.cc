#include "egress/client_hello.h"

#include <cstdint>

namespace warden::egress {
namespace {

class Reader {
 public:
  explicit Reader(absl::string_view d) : d_(d) {}
  bool U8(uint32_t* v) { return N(1, v); }
  bool U16(uint32_t* v) { return N(2, v); }
  bool U24(uint32_t* v) { return N(3, v); }
  bool Skip(size_t n) {
    if (d_.size() < n) return false;
    d_.remove_prefix(n);
    return true;
  }
  bool Take(size_t n, absl::string_view* out) {
    if (d_.size() < n) return false;
    *out = d_.substr(0, n);
    d_.remove_prefix(n);
    return true;
  }
  // A vector with a length prefix of `width` bytes.
  bool Vector(int width, absl::string_view* out) {
    uint32_t n = 0;
    return N(width, &n) && Take(n, out);
  }
  bool empty() const { return d_.empty(); }

 private:
  bool N(int width, uint32_t* v) {
    if (d_.size() < static_cast<size_t>(width)) return false;
    *v = 0;
    for (int i = 0; i < width; ++i) *v = (*v << 8) | static_cast<uint8_t>(d_[i]);
    d_.remove_prefix(width);
    return true;
  }
  absl::string_view d_;
};

ClientHello Malformed() { return {ClientHello::Status::kMalformed, std::nullopt}; }

}  // namespace

ClientHello ParseClientHello(absl::string_view data) {
  // Records: type 22 (handshake), version 3.x, length; their payloads
  // concatenated hold the handshake message.
  std::string handshake;
  size_t offset = 0;
  uint32_t needed = 0;  // the handshake message's length with its header, once known
  for (;;) {
    if (data.size() - offset < 5) {
      if (offset == 0 && !data.empty() && static_cast<uint8_t>(data[0]) != 22) return {ClientHello::Status::kNotTls, {}};
      return {ClientHello::Status::kNeedMore, {}};
    }
    const uint8_t type = static_cast<uint8_t>(data[offset]);
    const uint8_t major = static_cast<uint8_t>(data[offset + 1]);
    const uint32_t length = (static_cast<uint8_t>(data[offset + 3]) << 8) | static_cast<uint8_t>(data[offset + 4]);
    if (type != 22 || major != 3) {
      return offset == 0 ? ClientHello{ClientHello::Status::kNotTls, {}} : Malformed();
    }
    if (length == 0 || length > 16384 + 2048) return Malformed();
    if (data.size() - offset - 5 < length) {
      if (offset + 5 + length > kMaxClientHelloBytes) return Malformed();
      return {ClientHello::Status::kNeedMore, {}};
    }
    handshake.append(data.data() + offset + 5, length);
    offset += 5 + length;
    if (needed == 0 && handshake.size() >= 4) {
      if (static_cast<uint8_t>(handshake[0]) != 1) return Malformed();  // not a ClientHello
      needed = 4 + ((static_cast<uint8_t>(handshake[1]) << 16) | (static_cast<uint8_t>(handshake[2]) << 8) |
                    static_cast<uint8_t>(handshake[3]));
      if (needed > kMaxClientHelloBytes) return Malformed();
    }
    if (needed != 0 && handshake.size() >= needed) break;
    if (offset >= kMaxClientHelloBytes) return Malformed();
  }
  Reader r(absl::string_view(handshake).substr(4, needed - 4));
  absl::string_view ignored;
  uint32_t u = 0;
  if (!r.U16(&u) || !r.Skip(32) || !r.Vector(1, &ignored) || !r.Vector(2, &ignored) || !r.Vector(1, &ignored)) {
    return Malformed();
  }
  ClientHello out{ClientHello::Status::kComplete, std::nullopt};
  if (r.empty()) return out;  // no extensions
  absl::string_view extensions;
  if (!r.Vector(2, &extensions)) return Malformed();
  Reader e(extensions);
  bool seen = false;
  while (!e.empty()) {
    uint32_t type = 0;
    absl::string_view body;
    if (!e.U16(&type) || !e.Vector(2, &body)) return Malformed();
    if (type != 0) continue;  // server_name
    if (seen) return Malformed();  // one of each extension (RFC 8446 4.2)
    seen = true;
    Reader s(body);
    absl::string_view list;
    if (!s.Vector(2, &list) || !s.empty()) return Malformed();
    Reader l(list);
    while (!l.empty()) {
      uint32_t name_type = 0;
      absl::string_view name;
      if (!l.U8(&name_type) || !l.Vector(2, &name)) return Malformed();
      if (name_type != 0) continue;
      if (out.server_name) return Malformed();  // one host_name only (RFC 6066 3)
      out.server_name = std::string(name);
    }
  }
  return out;
}

}  // namespace warden::egress
