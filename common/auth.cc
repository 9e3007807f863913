// LoadTokens and TokenTable: reading and checking the tokens file, the
// constant-time lookup, and the Bearer header. No message shows a token.
#include "common/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/config_reader.h"
#include "common/constant_time.h"
#include "nlohmann/json.hpp"
#include "sandbox/unique_fd.h"

namespace warden {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxFileBytes = 16 << 20;

bool IsTenantChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

// Printable ASCII without space: what an HTTP/2 header value can carry
// after "Bearer " without quoting.
bool IsTokenChar(char c) { return c > 0x20 && c < 0x7f; }

// Where a type or key problem is, without the value (it may be a token).
std::string JsonType(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::number_float:
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "a number";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

// An unknown key, named only when it is too short to be a token (someone
// may have written {"<token>": "<tenant>"}).
std::string UnknownKey(const std::string& key) {
  if (key.size() >= TokenTable::kMinTokenLength)
    return "an unknown key (not shown: it may be a token)";
  return absl::StrCat("unknown key '", absl::CHexEscape(key), "'");
}

}  // namespace

absl::StatusOr<TokenTable> TokenTable::Create(std::vector<Entry> entries,
                                              absl::string_view source) {
  std::vector<std::string> problems;
  const std::string how_to_make =
      "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'";
  std::map<absl::string_view, size_t> first_index;  // token -> entry; never printed
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    // Entries are named by index only: a tenant field may hold a token by
    // mistake (swapped fields), and no message may show a token.
    const std::string where = absl::StrCat("tokens[", i, "]");
    if (e.token.size() < kMinTokenLength) {
      problems.push_back(
          absl::StrCat(where, ": the token is ",
                       e.token.empty() ? "empty" : absl::StrCat(e.token.size(), " characters"),
                       "; tokens need at least ", kMinTokenLength, " (", how_to_make, ")"));
    } else if (e.token.size() > kMaxTokenLength) {
      problems.push_back(
          absl::StrCat(where, ": the token is longer than ", kMaxTokenLength, " characters"));
    } else if (!std::all_of(e.token.begin(), e.token.end(), IsTokenChar)) {
      problems.push_back(absl::StrCat(
          where,
          ": the token has a space, a control or a non-ASCII character, which cannot be "
          "sent in a header; ",
          how_to_make));
    } else if (auto [it, inserted] = first_index.emplace(e.token, i); !inserted) {
      problems.push_back(absl::StrCat("tokens[", it->second, "] and tokens[", i,
                                      "] have the same token: give each entry its own"));
    }
    if (e.tenant.empty()) {
      problems.push_back(absl::StrCat(where, ": the tenant is empty; name it, e.g. \"team-a\""));
    } else if (e.tenant.size() > kMaxTenantLength ||
               !std::all_of(e.tenant.begin(), e.tenant.end(), IsTenantChar) || e.tenant == "." ||
               e.tenant == "..") {
      problems.push_back(absl::StrCat(where, ": the tenant is not a valid tenant name: use 1 to ",
                                      kMaxTenantLength,
                                      " of A-Z a-z 0-9 . _ - (and not '.' or '..')"));
    }
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", problems.size() == 1 ? "" : absl::StrCat(problems.size(), " problems:\n  "),
        absl::StrJoin(problems, "\n  ")));
  }
  return TokenTable(std::move(entries));
}

const std::string* TokenTable::Lookup(absl::string_view token) const {
  if (token.empty()) return nullptr;
  // Every entry is compared whatever matched; at most one can (duplicates
  // are refused), and the index is picked without a data-dependent branch.
  size_t found = entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i) {
    const size_t mask =
        static_cast<size_t>(0) - static_cast<size_t>(ConstantTimeEquals(token, entries_[i].token));
    found = (i & mask) | (found & ~mask);
  }
  return found < entries_.size() ? &entries_[found].tenant : nullptr;
}

absl::StatusOr<TokenTable> LoadTokens(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot open tokens file ", path, " (auth.tokens_file)"));
  }
  // Checked on the open file, so it is the file that is then read.
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("fstat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("tokens file ", path, " is not a regular file"));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "tokens file %s can be read by group or others (mode %04o): run chmod 600 %s", path,
        st.st_mode & 07777, path));
  }
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tokens file ", path, " is owned by uid ", st.st_uid,
        ", who could change who may run code: run chown root ", path, " (or wardend's user)"));
  }
  if (static_cast<size_t>(st.st_size) > kMaxFileBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("tokens file ", path, " is larger than ", kMaxFileBytes >> 20, " MiB"));
  }
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("read ", path));
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxFileBytes) {
      return absl::FailedPreconditionError(
          absl::StrCat("tokens file ", path, " is larger than ", kMaxFileBytes >> 20, " MiB"));
    }
  }

  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::parse_error& e) {
    // Only the position: nlohmann's message quotes what it last read, which
    // may be part of a token.
    const config::TextPosition at = config::PositionOf(text, e.byte > 0 ? e.byte - 1 : 0);
    return absl::InvalidArgumentError(absl::StrCat("tokens file ", path,
                                                   ": JSON syntax error at line ", at.line,
                                                   ", column ", at.column));
  } catch (const Json::out_of_range&) {  // a number too large for any C++ type
    return absl::InvalidArgumentError(
        absl::StrCat("tokens file ", path, " holds a number too large to read; tokens and tenants are strings"));
  }

  const std::string shape = "expected {\"tokens\": [{\"token\": \"...\", \"tenant\": \"...\"}]}";
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens file ", path, " holds ", JsonType(json), "; ", shape));
  }
  for (const auto& [key, value] : json.items()) {
    if (key != "tokens") {
      return absl::InvalidArgumentError(absl::StrCat(
          UnknownKey(key), " at the top level of tokens file ", path, "; known keys: tokens"));
    }
  }
  auto list = json.find("tokens");
  if (list == json.end() || !list->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens file ", path, ": ",
                     list == json.end() ? "no \"tokens\" key" : "\"tokens\" is " + JsonType(*list),
                     "; ", shape));
  }
  if (list->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens file ", path,
                     " lists no tokens, so nobody could call wardend: add one, or unset "
                     "auth.tokens_file to run without authentication on a UNIX socket"));
  }
  std::vector<TokenTable::Entry> entries;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& item = (*list)[i];
    const std::string where = absl::StrCat("tokens file ", path, ": tokens[", i, "]");
    if (!item.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " is ", JsonType(item), "; expected {\"token\": ..., \"tenant\": ...}"));
    }
    TokenTable::Entry entry;
    for (const auto& [key, value] : item.items()) {
      std::string* field = key == "token"    ? &entry.token
                           : key == "tenant" ? &entry.tenant
                                             : nullptr;
      if (field == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(UnknownKey(key), " in tokens[", i,
                                                       "] of tokens file ", path,
                                                       "; known keys: token, tenant"));
      }
      if (!value.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".", key, " must be a string, not ", JsonType(value)));
      }
      *field = value.get<std::string>();
    }
    entries.push_back(std::move(entry));
  }
  return TokenTable::Create(std::move(entries), absl::StrCat("tokens file ", path));
}

absl::StatusOr<std::string> TenantFromAuthorization(const TokenTable& tokens,
                                                    absl::string_view header_value) {
  constexpr absl::string_view kHowTo = "send the metadata 'authorization: Bearer <token>'";
  absl::string_view value = absl::StripAsciiWhitespace(header_value);
  if (value.empty()) {
    return absl::UnauthenticatedError(absl::StrCat("no credentials: ", kHowTo));
  }
  constexpr absl::string_view kScheme = "bearer";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme) ||
      (value[kScheme.size()] != ' ' && value[kScheme.size()] != '\t')) {
    // Not echoed: whatever scheme was used, the value is a credential.
    return absl::UnauthenticatedError(
        absl::StrCat("the authorization header does not use the Bearer scheme: ", kHowTo));
  }
  absl::string_view token = absl::StripLeadingAsciiWhitespace(value.substr(kScheme.size()));
  if (token.empty()) {
    return absl::UnauthenticatedError(absl::StrCat("the bearer token is empty: ", kHowTo));
  }
  if (token.size() > TokenTable::kMaxTokenLength) {
    return absl::UnauthenticatedError("invalid bearer token");
  }
  const std::string* tenant = tokens.Lookup(token);
  if (tenant == nullptr) return absl::UnauthenticatedError("invalid bearer token");
  return *tenant;
}

}  // namespace warden
