#include "fronts/e2b/file_signature.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace warden::e2b {

std::string FileSignature(absl::string_view path, absl::string_view operation, absl::string_view user,
                          absl::string_view access_token, std::optional<int64_t> expiration) {
  std::string raw = absl::StrCat(path, ":", operation, ":", user, ":", access_token);
  if (expiration) absl::StrAppend(&raw, ":", *expiration);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(raw.data()), raw.size(), digest);
  std::string encoded = absl::Base64Escape(absl::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
  while (!encoded.empty() && encoded.back() == '=') encoded.pop_back();
  return absl::StrCat("v1_", encoded);
}

bool SignedWith(const SignedUrl& url, absl::string_view access_token) {
  const std::string expected = FileSignature(url.path, url.operation, url.user, access_token, url.expiration);
  return expected.size() == url.signature.size() &&
         CRYPTO_memcmp(expected.data(), url.signature.data(), expected.size()) == 0;
}

absl::Status CheckExpiration(const SignedUrl& url, absl::Time now) {
  if (url.expiration && *url.expiration < absl::ToUnixSeconds(now)) {
    return absl::UnauthenticatedError("signature is already expired");
  }
  return absl::OkStatus();
}

}  // namespace warden::e2b
