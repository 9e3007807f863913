#include "images/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "sandbox/unique_fd.h"

namespace warden::images {

absl::StatusOr<Digest> Digest::Parse(absl::string_view text) {
  if (!absl::ConsumePrefix(&text, "sha256:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("digest '", text.substr(0, 80), "' is not sha256:<64 hex digits>"));
  }
  if (text.size() != 64) {
    return absl::InvalidArgumentError(absl::StrCat("a sha256 digest has 64 hex digits, not ", text.size()));
  }
  for (char c : text) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) {
      return absl::InvalidArgumentError("a sha256 digest is lowercase hex digits");
    }
  }
  return FromHex(std::string(text));
}

Digest Digest::FromHex(std::string hex) {
  Digest d;
  d.hex_ = std::move(hex);
  return d;
}

struct Sha256::Context {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : context_(new Context) {
  context_->ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(context_->ctx); }

void Sha256::Update(const void* data, size_t size) { EVP_DigestUpdate(context_->ctx, data, size); }

Digest Sha256::Finish() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(context_->ctx, md, &len);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 15];
  }
  return Digest::FromHex(std::move(hex));
}

Digest Sha256::Of(absl::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.Finish();
}

absl::StatusOr<Digest> Sha256::OfFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  return OfFd(fd.get());
}

absl::StatusOr<Digest> Sha256::OfFd(int fd) {
  Sha256 h;
  std::string buf(1 << 17, '\0');
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "read");
    if (n == 0) break;
    h.Update(buf.data(), static_cast<size_t>(n));
  }
  return h.Finish();
}

Digest ChainId(const Digest* diff_ids, size_t count) {
  if (count == 0) return Digest();
  Digest chain = diff_ids[0];
  for (size_t i = 1; i < count; ++i) {
    chain = Sha256::Of(absl::StrCat(chain.str(), " ", diff_ids[i].str()));
  }
  return chain;
}

}  // namespace warden::images
