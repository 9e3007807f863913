#include "fronts/e2b/gzip.h"

#include <zlib.h>

#include "absl/strings/str_cat.h"

namespace warden::e2b {

absl::StatusOr<std::string> Gunzip(absl::string_view data, size_t max_bytes) {
  z_stream z = {};
  // 16 + MAX_WBITS: a gzip header and trailer, not zlib's or raw deflate.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return absl::InternalError("inflateInit2 failed");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  char buf[65536];
  int rc = Z_OK;
  while (z.avail_in > 0 || rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      return absl::InvalidArgumentError(absl::StrCat(
          "the body is not valid gzip (", z.msg != nullptr ? z.msg : "inflate failed",
          "): send it gzip'ed whole, or without Content-Encoding"));
    }
    out.append(buf, sizeof(buf) - z.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&z);
      return absl::InvalidArgumentError(absl::StrCat("the gzip body inflates past ", max_bytes, " bytes"));
    }
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      inflateReset(&z);  // another member follows
      rc = Z_OK;
    } else if (z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      return absl::InvalidArgumentError("the gzip body ends early: send it whole");
    }
  }
  inflateEnd(&z);
  return out;
}

}  // namespace warden::e2b
