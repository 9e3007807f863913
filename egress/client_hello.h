// The server name a TLS client asks for (SNI, RFC 6066), read from the first
// bytes it sends, without terminating its TLS: how the proxy checks that a
// tunnelled connection goes where its CONNECT said (no domain fronting).
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace warden::egress {

struct ClientHello {
  enum class Status {
    kNeedMore,  // a TLS handshake so far: read more
    kNotTls,    // the bytes are not a TLS ClientHello
    kMalformed, // they start like one and then break its rules
    kComplete,
  };
  Status status = Status::kNeedMore;
  std::optional<std::string> server_name;  // kComplete: the host_name, if the client sent one
};

// Reads a ClientHello from the start of `data` (handshake fragments across
// records allowed, up to kMaxBytes).
ClientHello ParseClientHello(absl::string_view data);
inline constexpr size_t kMaxClientHelloBytes = 32 * 1024;

}  // namespace warden::egress
