// AccessPolicy: which hosts and web origins may call the HTTP front - the
// one defence every protocol shares against DNS rebinding and against web
// pages calling a local Warden (issue 20). The server applies it to every
// request before routing it to a handler, before authentication and before
// reading a body:
//   - Host. When callers are not told apart by tokens (check_host), a
//     request must name the server as a loopback address (localhost,
//     127.0.0.0/8, [::1]) or an entry of allowed_hosts. A page that rebinds
//     its own name to 127.0.0.1 still sends that name as Host: refused.
//   - Origin. A request that carries one (browsers send it with every
//     request a page makes but a same-origin GET or HEAD, and with every
//     WebSocket handshake) must come from a loopback origin or an entry of
//     allowed_origins, with tokens or without.
//   - CORS. Only those origins get Access-Control-Allow-Origin (never "*"),
//     so a foreign page cannot read an answer; a preflight from any other
//     origin is refused. An allowed origin's preflight gets the path's
//     methods and the request headers its protocol's browser clients send
//     (Protocol::cors_request_headers).
// A refusal is PERMISSION_DENIED (403), rendered in the protocol's shape,
// and names the setting that would allow the caller.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fronts/http/request.h"

namespace warden::http {

struct Protocol;

struct AccessOptions {
  // Refuse a Host that is neither loopback nor in allowed_hosts. wardend
  // sets it when it has no tokens, or when allowed_hosts is not empty.
  bool check_host = true;
  // Names ("warden.internal") or name:port pairs a request's Host may give
  // besides loopback ones; names match any port. Case-insensitive.
  std::vector<std::string> allowed_hosts;
  // Origins ("https://app.example.com") that may call besides loopback
  // ones, and that get CORS answers. Compared after NormalizeOrigin.
  std::vector<std::string> allowed_origins;
  // Where the settings live, for refusal messages: "http.allowed_hosts" etc.
  std::string settings_prefix = "http.";
};

class AccessPolicy {
 public:
  AccessPolicy() : AccessPolicy(AccessOptions{}) {}
  explicit AccessPolicy(AccessOptions options);

  // OK when the request's Host and Origin may call; PERMISSION_DENIED with
  // the setting to change otherwise.
  absl::Status Check(const Request& request) const;

  // An OPTIONS request with Origin and Access-Control-Request-Method.
  static bool IsPreflight(const Request& request);
  // The headers an answer to an allowed request carrying Origin gets (none
  // without Origin): Access-Control-Allow-Origin, Vary and, if the protocol
  // has some, Access-Control-Expose-Headers.
  std::vector<std::pair<std::string, std::string>> CorsHeaders(const Request& request,
                                                                const Protocol* protocol) const;
  // The 204 for an allowed preflight of a path whose routes take `methods`.
  Response Preflight(const Request& request, const Protocol* protocol,
                     const std::vector<std::string>& methods) const;

  const AccessOptions& options() const { return options_; }

 private:
  bool OriginAllowed(absl::string_view origin) const;
  bool HostAllowed(absl::string_view host) const;

  AccessOptions options_;
};

// Whether a host name, as a Host header or an origin gives it (IPv6 in
// brackets, no port), is loopback: localhost, 127.0.0.0/8, [::1] or
// [::ffff:127.x.y.z]. "0.0.0.0" is not: browsers reach it, it names no one.
bool IsLoopbackName(absl::string_view host);
// The name of a Host header value, lower case, without the port:
// "Evil.Example:8080" -> "evil.example", "[::1]:80" -> "[::1]".
std::string HostName(absl::string_view host);
// "HTTPS://App.Example.com:443/" -> "https://app.example.com": scheme and
// name in lower case, the scheme's default port and a trailing slash
// dropped. INVALID_ARGUMENT for what is not scheme://host[:port] (a path,
// a wildcard, "null").
absl::StatusOr<std::string> NormalizeOrigin(absl::string_view origin);
// A configured allowed_hosts entry, checked and lower-cased: "name" or
// "name:port", IPv6 in brackets; INVALID_ARGUMENT for a wildcard, a scheme
// or a path.
absl::StatusOr<std::string> NormalizeAllowedHost(absl::string_view entry);

}  // namespace warden::http
