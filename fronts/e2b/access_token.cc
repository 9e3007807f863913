#include "fronts/e2b/access_token.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace warden::e2b {
namespace {

constexpr char kPrefix[] = "wa1_";
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr char kAadPrefix[] = "warden e2b access token for ";

struct CipherFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, CipherFree>;

const unsigned char* Bytes(absl::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

absl::Status Refused() { return absl::PermissionDeniedError("the access token is not valid for this sandbox"); }

}  // namespace

absl::StatusOr<AccessTokens> AccessTokens::WithKey(absl::string_view key) {
  if (key.size() != kKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the E2B access token key is ", key.size(), " bytes; it must be ",
                                                   kKeyBytes, " (make one with `openssl rand 32`)"));
  }
  return AccessTokens(std::string(key));
}

AccessTokens AccessTokens::Random() {
  std::string key(kKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size())) != 1) abort();
  return AccessTokens(std::move(key));
}

absl::StatusOr<std::string> ReadAccessKey(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read http.e2b_key_file ", path));
  std::stringstream content;
  content << in.rdbuf();
  std::string key = content.str();
  if (key.size() != AccessTokens::kKeyBytes) {
    const std::string text(absl::StripAsciiWhitespace(key));
    if (text.size() == 2 * AccessTokens::kKeyBytes &&
        std::all_of(text.begin(), text.end(), [](char c) { return absl::ascii_isxdigit(c); })) {
      return absl::HexStringToBytes(text);
    }
    return absl::InvalidArgumentError(absl::StrCat("http.e2b_key_file ", path, " holds ", key.size(),
                                                   " bytes: it must hold 32 bytes, or 64 hex digits "
                                                   "(make one with `openssl rand -hex 32`)"));
  }
  return key;
}

std::string AccessTokens::Seal(absl::string_view sandbox_id, absl::string_view api_key) const {
  std::string out(kNonceBytes + api_key.size() + kTagBytes, '\0');
  auto* nonce = reinterpret_cast<unsigned char*>(out.data());
  if (RAND_bytes(nonce, kNonceBytes) != 1) abort();
  const std::string aad = absl::StrCat(kAadPrefix, sandbox_id);
  CipherContext ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  bool ok = ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, Bytes(key_), nonce) == 1 &&
            EVP_EncryptUpdate(ctx.get(), nullptr, &len, Bytes(aad), static_cast<int>(aad.size())) == 1 &&
            EVP_EncryptUpdate(ctx.get(), nonce + kNonceBytes, &len, Bytes(api_key),
                              static_cast<int>(api_key.size())) == 1 &&
            EVP_EncryptFinal_ex(ctx.get(), nonce + kNonceBytes + len, &len) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes,
                                nonce + kNonceBytes + api_key.size()) == 1;
  if (!ok) abort();  // only on allocation failure: OpenSSL's AES-GCM cannot refuse these inputs
  return absl::StrCat(kPrefix, absl::WebSafeBase64Escape(out));
}

absl::StatusOr<std::string> AccessTokens::Open(absl::string_view token, absl::string_view sandbox_id) const {
  std::string raw;
  if (!absl::ConsumePrefix(&token, kPrefix) || !absl::WebSafeBase64Unescape(token, &raw) ||
      raw.size() < kNonceBytes + kTagBytes) {
    return Refused();
  }
  const size_t text_bytes = raw.size() - kNonceBytes - kTagBytes;
  const auto* nonce = Bytes(raw);
  std::string plain(text_bytes, '\0');
  const std::string aad = absl::StrCat(kAadPrefix, sandbox_id);
  std::string tag = raw.substr(kNonceBytes + text_bytes);
  CipherContext ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  const bool ok =
      ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, Bytes(key_), nonce) == 1 &&
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, Bytes(aad), static_cast<int>(aad.size())) == 1 &&
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &len, nonce + kNonceBytes,
                        static_cast<int>(text_bytes)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + len, &len) == 1;
  if (!ok) return Refused();  // the tag did not match: altered, or not sealed for this sandbox under this key
  return plain;
}

}  // namespace warden::e2b
