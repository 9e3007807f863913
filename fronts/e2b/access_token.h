// A sandbox's envd access token that carries what it stands for, so that
// no front has to remember it: {sandbox id, the X-API-KEY that created or
// connected it}, sealed with AES-256-GCM under a key every front of a fleet
// shares (http.e2b_key_file; a random one per start without it). The API key
// is the plaintext; the sandbox id is authenticated data, so a token opens
// only for the sandbox it was made for. A front that restarts with the same
// key opens the tokens it handed out before, and calls warden.v1 with the
// key inside: a revoked API key revokes its access tokens with it.
//   token = "wa1_" + base64url(nonce[12] || ciphertext || tag[16])
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden::e2b {

class AccessTokens {
 public:
  static constexpr size_t kKeyBytes = 32;

  // `key` must be kKeyBytes bytes.
  static absl::StatusOr<AccessTokens> WithKey(absl::string_view key);
  // A random key: tokens open only in this process.
  static AccessTokens Random();

  // A new token (a fresh nonce each time) for `sandbox_id` and `api_key`.
  std::string Seal(absl::string_view sandbox_id, absl::string_view api_key) const;
  // The API key inside `token` when it was sealed under this key for
  // `sandbox_id`; PermissionDenied for anything else (altered, another
  // sandbox's, another key's, not a token at all), saying no more.
  absl::StatusOr<std::string> Open(absl::string_view token, absl::string_view sandbox_id) const;

 private:
  explicit AccessTokens(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

// The key in a file: 32 bytes as they are, or 64 hex digits (surrounding
// whitespace ignored), e.g. from `openssl rand 32` or `openssl rand -hex 32`.
absl::StatusOr<std::string> ReadAccessKey(const std::string& path);

}  // namespace warden::e2b
