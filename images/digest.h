// Digests as OCI names content: "sha256:<64 lowercase hex digits>", and the
// streaming SHA-256 that computes them (OpenSSL's EVP).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden::images {

// A validated "sha256:<hex>" digest. Other algorithms are refused: OCI
// allows sha512 too, but every image tool in use writes sha256.
class Digest {
 public:
  Digest() = default;
  static absl::StatusOr<Digest> Parse(absl::string_view text);
  static Digest FromHex(std::string hex);  // 64 lowercase hex digits, unchecked

  const std::string& hex() const { return hex_; }
  std::string str() const { return "sha256:" + hex_; }
  bool empty() const { return hex_.empty(); }
  bool operator==(const Digest& other) const { return hex_ == other.hex_; }
  bool operator!=(const Digest& other) const { return hex_ != other.hex_; }
  bool operator<(const Digest& other) const { return hex_ < other.hex_; }

 private:
  std::string hex_;
};

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  void Update(absl::string_view data) { Update(data.data(), data.size()); }
  // The digest of everything so far; the hasher is then spent.
  Digest Finish();

  static Digest Of(absl::string_view data);
  // The digest of a whole file (read with its own fd), or of what is left
  // to read from `fd`.
  static absl::StatusOr<Digest> OfFile(const std::string& path);
  static absl::StatusOr<Digest> OfFd(int fd);

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

// OCI's ChainID of a stack of layers, bottom first: the first layer's
// DiffID, then sha256("<chain so far> <next DiffID>") for each next one
// (the image-spec's "config.md", "Layer ChainID").
Digest ChainId(const Digest* diff_ids, size_t count);

}  // namespace warden::images
