// File uploads on the E2B front: the Content-Type (up to the first newline)
// and a multipart/form-data body. Never a crash; parts never exceed the cap
// or hold more bytes than the body did.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fronts/e2b/multipart.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string content_type = input.substr(0, newline);
  const std::string body = newline == std::string::npos ? "" : input.substr(newline + 1);
  auto boundary = warden::e2b::MultipartBoundary(content_type);
  if (!boundary.ok()) return 0;
  auto parts = warden::e2b::ParseMultipart(body, *boundary, /*max_parts=*/8);
  if (!parts.ok()) return 0;
  FUZZ_CHECK(parts->size() <= 8);
  size_t total = 0;
  for (const auto& part : *parts) total += part.content.size() + part.name.size() + part.filename.size();
  FUZZ_CHECK(total <= body.size());
  return 0;
}
