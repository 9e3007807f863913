// Bearer-token authentication: the tokens file (auth.tokens_file), the table
// mapping each token to its tenant, and the "authorization" header check.
// Tokens are secrets: no message, log line or status from here contains one.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden {

// Token -> tenant. Immutable once built, so safe to share between threads.
class TokenTable {
 public:
  struct Entry {
    std::string token;   // at least kMinTokenLength printable ASCII characters
    std::string tenant;  // [A-Za-z0-9._-]{1,64}
  };
  static constexpr size_t kMinTokenLength = 16;
  static constexpr size_t kMaxTokenLength = 4096;
  static constexpr size_t kMaxTenantLength = 64;

  TokenTable() = default;  // no tokens: every lookup fails
  // Checks every entry (see LoadTokens); `source` names them in messages.
  static absl::StatusOr<TokenTable> Create(std::vector<Entry> entries,
                                           absl::string_view source = "tokens file");

  // The tenant whose token is `token`, or nullptr. Compares `token` with
  // every stored token in time that depends only on the stored tokens'
  // lengths, never on how much of `token` matches, so timing reveals no
  // prefix. The pointer lives as long as the table.
  const std::string* Lookup(absl::string_view token) const;

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

 private:
  explicit TokenTable(std::vector<Entry> entries) : entries_(std::move(entries)) {}
  std::vector<Entry> entries_;
};

// Reads `path`: JSON {"tokens": [{"token": "...", "tenant": "..."}, ...]}.
// Refuses a file group or others can read (chmod 600 it) or that is owned by
// someone other than root or the daemon's user; tokens shorter than 16
// characters or not printable ASCII; duplicate tokens; empty tenants or
// tenants with characters outside [A-Za-z0-9._-]; unknown keys; an empty
// list. A tenant may have several tokens (for rotation).
absl::StatusOr<TokenTable> LoadTokens(const std::string& path);

// Parses an "authorization" header value, "Bearer <token>" (the scheme in
// any case), and returns the token's tenant; absl::UnauthenticatedError
// when the header is missing, malformed or the token unknown.
absl::StatusOr<std::string> TenantFromAuthorization(const TokenTable& tokens,
                                                    absl::string_view header_value);

}  // namespace warden
