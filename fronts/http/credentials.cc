#include "fronts/http/credentials.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace warden::http {
namespace {

// The credential after "SCHEME " in the Authorization field, "" otherwise.
std::string AuthorizationWithScheme(const Request& request, absl::string_view scheme) {
  const std::string value = request.Header("Authorization");
  absl::string_view v = absl::StripAsciiWhitespace(value);
  if (v.size() <= scheme.size() || !absl::StartsWithIgnoreCase(v, scheme) || v[scheme.size()] != ' ') {
    return "";
  }
  return std::string(absl::StripAsciiWhitespace(v.substr(scheme.size() + 1)));
}

}  // namespace

std::string BearerToken(const Request& request) { return AuthorizationWithScheme(request, "Bearer"); }

std::string HeaderToken(const Request& request, absl::string_view header) {
  return std::string(absl::StripAsciiWhitespace(request.Header(header)));
}

std::string JupyterToken(const Request& request) {
  std::string token = AuthorizationWithScheme(request, "token");
  if (token.empty()) token = AuthorizationWithScheme(request, "Bearer");
  if (token.empty()) token = request.Query("token");
  return token;
}

}  // namespace warden::http
