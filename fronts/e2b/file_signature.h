// E2B's signed file URLs (Sandbox.downloadUrl / uploadUrl): a URL to
// /files that carries, instead of the sandbox's access token, a signature
// made with it, so that a browser or a plain HTTP client can read or write
// one file. As the SDKs sign:
//   signature = "v1_" + base64(sha256("PATH:OPERATION:USER:TOKEN"))  (no '=')
// with ":EXPIRATION" (unix seconds) appended before hashing when the URL
// expires; OPERATION is "read" (GET) or "write" (POST); USER is the
// `username` of the URL, "" when it has none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace warden::e2b {

std::string FileSignature(absl::string_view path, absl::string_view operation, absl::string_view user,
                          absl::string_view access_token, std::optional<int64_t> expiration);

// The parts of a signed URL, from its query.
struct SignedUrl {
  std::string path;
  std::string operation;  // "read" or "write"
  std::string user;
  std::string signature;
  std::optional<int64_t> expiration;  // unix seconds
};

// Whether `url` was signed with `access_token` (compared in constant time).
bool SignedWith(const SignedUrl& url, absl::string_view access_token);

// OK while the URL has not expired at `now`; else Unauthenticated with the
// message envd gives ("signature is already expired").
absl::Status CheckExpiration(const SignedUrl& url, absl::Time now);

}  // namespace warden::e2b
