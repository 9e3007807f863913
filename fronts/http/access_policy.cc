#include "fronts/http/access_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "fronts/http/router.h"

namespace warden::http {
namespace {

// The default port of a scheme, "" for one without.
absl::string_view DefaultPort(absl::string_view scheme) {
  if (scheme == "http" || scheme == "ws") return "80";
  if (scheme == "https" || scheme == "wss") return "443";
  return "";
}

bool ValidPort(absl::string_view port) {
  int n = 0;
  return !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == absl::string_view::npos &&
         absl::SimpleAtoi(port, &n) && n > 0 && n <= 65535;
}

// Splits "name[:port]" (IPv6 in brackets); false if malformed.
bool SplitHostPort(absl::string_view text, absl::string_view* name, absl::string_view* port) {
  *port = "";
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return false;
    *name = text.substr(0, close + 1);
    absl::string_view rest = text.substr(close + 1);
    if (rest.empty()) return true;
    if (rest.front() != ':') return false;
    *port = rest.substr(1);
    return ValidPort(*port);
  }
  const size_t colon = text.rfind(':');
  *name = text.substr(0, colon);
  if (colon != absl::string_view::npos) {
    *port = text.substr(colon + 1);
    if (!ValidPort(*port)) return false;
  }
  return !name->empty();
}

// A host name as configured or sent: letters, digits, '-', '.', '_', or a
// bracketed IPv6 literal. No wildcard, no user info.
bool ValidName(absl::string_view name) {
  if (name.empty()) return false;
  if (absl::StartsWith(name, "[")) {
    in6_addr a;
    return absl::EndsWith(name, "]") && inet_pton(AF_INET6, std::string(name.substr(1, name.size() - 2)).c_str(), &a) == 1;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  });
}

}  // namespace

bool IsLoopbackName(absl::string_view host) {
  const std::string name = absl::AsciiStrToLower(host);
  if (name == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, name.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') {
    in6_addr v6;
    if (inet_pton(AF_INET6, name.substr(1, name.size() - 2).c_str(), &v6) != 1) return false;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

std::string HostName(absl::string_view host) {
  host = absl::StripAsciiWhitespace(host);
  absl::string_view name, port;
  if (!SplitHostPort(host, &name, &port)) return absl::AsciiStrToLower(host);
  return absl::AsciiStrToLower(name);
}

absl::StatusOr<std::string> NormalizeOrigin(absl::string_view origin) {
  const auto bad = [origin](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("'", origin, "' is not an origin (", why,
                                                   "): give scheme://host[:port], e.g. https://app.example.com"));
  };
  absl::string_view text = absl::StripAsciiWhitespace(origin);
  if (absl::EndsWith(text, "/")) text.remove_suffix(1);
  const size_t sep = text.find("://");
  if (sep == absl::string_view::npos || sep == 0) return bad("no scheme");
  const std::string scheme = absl::AsciiStrToLower(text.substr(0, sep));
  if (!std::all_of(scheme.begin(), scheme.end(), [](char c) {
        return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
      })) {
    return bad("a malformed scheme");
  }
  absl::string_view authority = text.substr(sep + 3);
  if (authority.find_first_of("/?#@*") != absl::string_view::npos) return bad("a path, user or wildcard");
  absl::string_view name, port;
  if (!SplitHostPort(authority, &name, &port) || !ValidName(name)) return bad("a malformed host");
  std::string out = absl::StrCat(scheme, "://", absl::AsciiStrToLower(name));
  if (!port.empty() && port != DefaultPort(scheme)) absl::StrAppend(&out, ":", port);
  return out;
}

absl::StatusOr<std::string> NormalizeAllowedHost(absl::string_view entry) {
  absl::string_view text = absl::StripAsciiWhitespace(entry);
  absl::string_view name, port;
  if (text.find_first_of("/*@") != absl::string_view::npos || !SplitHostPort(text, &name, &port) ||
      !ValidName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", entry, "' is not a host name: give a name or name:port as clients put it in Host, e.g. "
        "warden.internal or warden.internal:8080 (no scheme, path or wildcard)"));
  }
  return absl::AsciiStrToLower(text);
}

AccessPolicy::AccessPolicy(AccessOptions options) : options_(std::move(options)) {
  // Entries are checked when the configuration is read; normalize here
  // too, so that a caller of the library gets what the daemon gets.
  for (std::string& origin : options_.allowed_origins) {
    if (auto normalized = NormalizeOrigin(origin); normalized.ok()) origin = *normalized;
  }
  for (std::string& host : options_.allowed_hosts) host = absl::AsciiStrToLower(host);
}

bool AccessPolicy::HostAllowed(absl::string_view host) const {
  const std::string name = HostName(host);
  if (IsLoopbackName(name)) return true;
  const std::string whole = absl::AsciiStrToLower(absl::StripAsciiWhitespace(host));
  for (const std::string& entry : options_.allowed_hosts) {
    if (entry == whole || entry == name) return true;
  }
  return false;
}

bool AccessPolicy::OriginAllowed(absl::string_view origin) const {
  absl::StatusOr<std::string> normalized = NormalizeOrigin(origin);
  if (!normalized.ok()) return false;  // "null" (sandboxed frames, file:) among others
  const size_t sep = normalized->find("://");
  const absl::string_view scheme = absl::string_view(*normalized).substr(0, sep);
  absl::string_view name, port;
  if ((scheme == "http" || scheme == "https") &&
      SplitHostPort(absl::string_view(*normalized).substr(sep + 3), &name, &port) && IsLoopbackName(name)) {
    return true;
  }
  return std::find(options_.allowed_origins.begin(), options_.allowed_origins.end(), *normalized) !=
         options_.allowed_origins.end();
}

absl::Status AccessPolicy::Check(const Request& request) const {
  if (options_.check_host) {
    // An absent Host (HTTP/1.0) comes from no browser, so from no rebound page.
    const std::string host = request.Header("Host");
    if (!host.empty() && !HostAllowed(host)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "Host '", host, "' is not allowed here (DNS rebinding protection): connect as localhost, 127.0.0.1 or "
          "[::1], or add the name to ", options_.settings_prefix, "allowed_hosts in wardend's configuration"));
    }
  }
  if (request.raw.find(boost::beast::http::field::origin) != request.raw.end()) {
    const std::string origin = request.Header("Origin");
    if (!OriginAllowed(origin)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "Origin '", origin, "' may not call this server (a web page's request; DNS rebinding and cross-site "
          "protection): call from a loopback origin, or add the origin to ", options_.settings_prefix,
          "allowed_origins in wardend's configuration"));
    }
  }
  return absl::OkStatus();
}

bool AccessPolicy::IsPreflight(const Request& request) {
  return request.raw.method() == boost::beast::http::verb::options && !request.Header("Origin").empty() &&
         !request.Header("Access-Control-Request-Method").empty();
}

std::vector<std::pair<std::string, std::string>> AccessPolicy::CorsHeaders(const Request& request,
                                                                           const Protocol* protocol) const {
  std::vector<std::pair<std::string, std::string>> headers;
  const std::string origin = request.Header("Origin");
  if (origin.empty() || !OriginAllowed(origin)) return headers;
  headers.emplace_back("Access-Control-Allow-Origin", origin);
  headers.emplace_back("Vary", "Origin");
  if (protocol != nullptr && !protocol->cors_expose_headers.empty()) {
    headers.emplace_back("Access-Control-Expose-Headers", absl::StrJoin(protocol->cors_expose_headers, ", "));
  }
  return headers;
}

Response AccessPolicy::Preflight(const Request& request, const Protocol* protocol,
                                 const std::vector<std::string>& methods) const {
  Response r;
  r.status = 204;
  r.content_type.clear();
  for (auto& header : CorsHeaders(request, protocol)) {
    if (header.first != "Access-Control-Expose-Headers") r.headers.push_back(std::move(header));
  }
  r.With("Access-Control-Allow-Methods", absl::StrJoin(methods, ", "));
  if (protocol != nullptr && !protocol->cors_request_headers.empty()) {
    r.With("Access-Control-Allow-Headers", absl::StrJoin(protocol->cors_request_headers, ", "));
  }
  // Chrome's Private Network Access: a public page's preflight to a
  // loopback or private server asks for this; allowed origins get it.
  if (absl::EqualsIgnoreCase(request.Header("Access-Control-Request-Private-Network"), "true")) {
    r.With("Access-Control-Allow-Private-Network", "true");
  }
  r.With("Access-Control-Max-Age", "600");
  return r;
}

}  // namespace warden::http
