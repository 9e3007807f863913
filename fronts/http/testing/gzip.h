// For tests of uploads with `Content-Encoding: gzip` (E2B's SDKs send files
// so with `gzip: true`): `data` as one gzip member, as zlib writes it.
#pragma once

#include <zlib.h>

#include <string>

namespace warden::http::testing {

inline std::string Gzip(const std::string& data) {
  z_stream z = {};
  deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace warden::http::testing
