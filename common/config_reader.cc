#include "common/config_reader.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace warden::config {
namespace {

// nlohmann's message without its "[json.exception.parse_error.101] parse
// error at line 3, column 1: syntax error " prefix; we give the position.
std::string ParseErrorDetail(const std::string& what) {
  absl::string_view detail = what;
  if (size_t p = detail.find("syntax error "); p != absl::string_view::npos) {
    detail.remove_prefix(p + 13);
  } else if (size_t q = detail.find("] "); q != absl::string_view::npos) {
    detail.remove_prefix(q + 2);
  }
  return std::string(detail);
}

absl::Status SyntaxError(const std::string& path, const std::string& text,
                         const nlohmann::json::parse_error& e) {
  // e.byte is 1-based: the offending character (or one past the end).
  const size_t offset = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
  const TextPosition at = PositionOf(text, offset);
  const size_t line_start = at.line_start;
  std::string message = absl::StrCat(path, ": JSON syntax error at line ", at.line, ", column ",
                                     at.column, ": ", ParseErrorDetail(e.what()));
  // nlohmann reports the end of the token it could not use.
  // The two classic mistakes in hand-written JSON.
  const absl::string_view line_text =
      absl::string_view(text).substr(line_start, std::min(text.size(), offset + 2) - line_start);
  const std::string detail = ParseErrorDetail(e.what());
  if (absl::StrContains(line_text, "//") || absl::StrContains(line_text, "/*")) {
    absl::StrAppend(&message, " (JSON has no comments; docs/operations.md documents every key)");
  } else {
    size_t before = offset;
    while (before > 0 && absl::ascii_isspace(static_cast<unsigned char>(text[before - 1]))) {
      --before;
    }
    if (before > 0 && text[before - 1] == ',' && offset < text.size() &&
        (text[offset] == '}' || text[offset] == ']')) {
      absl::StrAppend(&message, " (remove the trailing comma)");
    } else if (absl::StrContains(detail, "unexpected string literal; expected '}'") ||
               absl::StrContains(detail, "; expected ']'")) {
      absl::StrAppend(&message, " (is a comma missing before it?)");
    }
  }
  return absl::InvalidArgumentError(message);
}

}  // namespace

TextPosition PositionOf(absl::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  TextPosition at;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++at.line;
      at.line_start = i + 1;
    }
  }
  at.column = offset - at.line_start + 1;
  return at;
}

// Levenshtein distance, for "did you mean" on unknown keys.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "a string \"30s\"", "the number 1.5", "null", ... for type errors.
std::string Describe(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return absl::StrCat("the boolean ", value.dump());
    case Json::value_t::string: {
      std::string text = value.dump();
      if (text.size() > 40) text = absl::StrCat(text.substr(0, 37), "...");
      return absl::StrCat("the string ", text);
    }
    case Json::value_t::number_float:
      return absl::StrCat("the number ", value.dump());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return absl::StrCat("the integer ", value.dump());
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

absl::StatusOr<Json> ReadJsonObjectFile(const std::string& path, absl::string_view example) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return absl::ErrnoToStatus(
        err, absl::StrCat("cannot read configuration file ", path,
                          err == ENOENT ? absl::StrCat(" (pass --config FILE; ", example,
                                                       " is the default configuration)")
                                        : ""));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat("reading configuration file ", path, " failed"));
  }
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return SyntaxError(path, text, e);
  } catch (const Json::out_of_range& e) {  // a number too large for any C++ type
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what(), "; use a smaller number"));
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the configuration must be a JSON object {...}, not ", Describe(json)));
  }
  return json;
}

bool IsLoopbackHost(const std::string& host) {
  const std::string lower = absl::AsciiStrToLower(host);
  if (lower == "localhost" || lower == "localhost.") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

static bool IsHostName(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
  }
  return host.front() != '-' && host.front() != '.';
}

absl::StatusOr<ListenAddress> ParseAddress(const std::string& what, const std::string& address,
                                           bool allow_unix, bool allow_host_names) {
  ListenAddress out;
  if (absl::StartsWith(address, "unix:")) {
    if (!allow_unix) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address, "': it must be HOST:PORT, e.g. 127.0.0.1:9464"));
    }
    out.unix_socket = true;
    out.path = address.substr(5);
    if (out.path.empty() || out.path.front() != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " is '", address,
          "': a UNIX socket needs an absolute path, e.g. unix:/run/warden/wardend.sock"));
    }
    if (out.path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address, "': the socket path is ", out.path.size(),
                       " bytes; UNIX socket paths must be shorter than ",
                       sizeof(sockaddr_un{}.sun_path), " (use a shorter directory)"));
    }
    return out;
  }
  const std::string example = allow_unix ? "unix:/run/warden/wardend.sock, 127.0.0.1:7000 or "
                                           "[::1]:7000"
                                         : "127.0.0.1:9464 or [::1]:9464";
  std::string port_text;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == std::string::npos || address.compare(close, 2, "]:") != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address,
                       "': write an IPv6 address with its port as [ADDRESS]:PORT, "
                       "e.g. [::1]:7000"));
    }
    out.host = address.substr(1, close - 1);
    port_text = address.substr(close + 2);
    in6_addr v6;
    if (inet_pton(AF_INET6, out.host.c_str(), &v6) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address, "': '", out.host, "' is not an IPv6 address"));
    }
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address, "': expected ", example));
    }
    out.host = address.substr(0, colon);
    port_text = address.substr(colon + 1);
    if (out.host.find(':') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " is '", address, "': put an IPv6 address in brackets, e.g. [::1]:7000"));
    }
    if (out.host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address, "': name the host, e.g. 127.0.0.1", address,
                       " (or 0.0.0.0", address, " for every interface)"));
    }
    in_addr v4;
    if (inet_pton(AF_INET, out.host.c_str(), &v4) != 1 && !IsHostName(out.host)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is '", address, "': '", out.host,
                                                     "' is neither an IP address nor a host name"));
    }
    if (!allow_host_names && inet_pton(AF_INET, out.host.c_str(), &v4) != 1 &&
        absl::AsciiStrToLower(out.host) != "localhost") {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is '", address,
                       "': use an IP address or localhost, e.g. 127.0.0.1:9464 or "
                       "0.0.0.0:9464, not a host name"));
    }
  }
  int port = 0;
  if (port_text.empty() ||
      !std::all_of(port_text.begin(), port_text.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
      !absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535) {
    // Port 0 asks for any free port (tests; the bound port is logged).
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is '", address, "': the port must be 1 to 65535 (or 0 for any free port)"));
  }
  out.port = port;
  out.loopback = IsLoopbackHost(out.host);
  return out;
}

std::string CheckReadableFile(const std::string& setting, const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::StrCat(setting, " is '", path, "': ", std::strerror(errno),
                        "; point it at an existing PEM file");
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::StrCat(setting, " is '", path, "': not a regular file; point it at a PEM file");
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return absl::StrCat(setting, " is '", path, "': ", std::strerror(errno),
                        "; make it readable by wardend's user");
  }
  return "";
}


void CheckPositive(Problems& p, const std::string& name, int64_t value) {
  if (value <= 0) p.Add(absl::StrCat(name, " is ", value, "; it must be positive"));
}

}  // namespace warden::config
