// Where each protocol's clients put their bearer credential. Each returns
// the token, or "" when the request carries none in that place.
#pragma once

#include <string>

#include "fronts/http/request.h"

namespace warden::http {

// "Authorization: Bearer TOKEN" (MCP; the scheme in any case).
std::string BearerToken(const Request& request);
// The whole value of a header, e.g. "X-API-KEY: TOKEN" (E2B).
std::string HeaderToken(const Request& request, absl::string_view header);
// "Authorization: token TOKEN", then "?token=TOKEN" (the Jupyter servers).
std::string JupyterToken(const Request& request);

}  // namespace warden::http
