#include "fronts/e2b/gzip.h"

#include <zlib.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace warden::e2b {

absl::Status GunzipTo(absl::string_view data, size_t max_bytes, absl::string_view what,
                      const std::function<absl::Status(absl::string_view piece)>& sink) {
  z_stream z = {};
  // 16 + MAX_WBITS: a gzip header and trailer, not zlib's or raw deflate.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return absl::InternalError("inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  auto buf = std::make_unique<char[]>(kGunzipPiece);
  size_t total = 0;
  int rc = Z_OK;
  while (z.avail_in > 0 || rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf.get());
    z.avail_out = static_cast<uInt>(kGunzipPiece);
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the body is not valid gzip (", z.msg != nullptr ? z.msg : "inflate failed",
          "): send it gzip'ed whole, or without Content-Encoding"));
    }
    const size_t n = kGunzipPiece - z.avail_out;
    total += n;
    if (total > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("the gzip body inflates past ", max_bytes, " bytes, ", what));
    }
    if (n > 0) {
      if (absl::Status s = sink(absl::string_view(buf.get(), n)); !s.ok()) return s;
    }
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      inflateReset(&z);  // another member follows
      rc = Z_OK;
    } else if (z.avail_in == 0 && z.avail_out != 0) {
      return absl::InvalidArgumentError("the gzip body ends early: send it whole");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Gunzip(absl::string_view data, size_t max_bytes) {
  std::string out;
  absl::Status s = GunzipTo(data, max_bytes, "the most one request may hold", [&out](absl::string_view piece) {
    out.append(piece.data(), piece.size());
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace warden::e2b
