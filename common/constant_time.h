// ConstantTimeEquals: comparing a secret a caller presents (a token, a
// sandbox's access token) with the stored one without a timing oracle.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace warden {

// Whether `presented` equals `stored`, in time that depends on
// stored.size() only: how much of a guess is right never shows.
inline bool ConstantTimeEquals(absl::string_view presented, absl::string_view stored) {
  // Any difference, including in length, leaves a bit set in `diff`.
  uint64_t diff = static_cast<uint64_t>(presented.size() ^ stored.size());
  if (presented.empty()) return stored.empty();  // nothing to index; the length says no
  for (size_t i = 0; i < stored.size(); ++i) {
    diff |= static_cast<uint8_t>(presented[i % presented.size()] ^ stored[i]);
    // Keep the compiler from turning the loop into an early-exit memcmp.
    __asm__ volatile("" : "+r"(diff));
  }
  return diff == 0;
}

}  // namespace warden
