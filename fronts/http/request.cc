#include "fronts/http/request.h"

#include "absl/strings/ascii.h"

namespace warden::http {

std::string Request::Header(absl::string_view name) const {
  auto it = raw.find(boost::beast::string_view(name.data(), name.size()));
  if (it == raw.end()) return "";
  return std::string(it->value());
}

std::string Request::Param(absl::string_view name) const {
  auto it = params.find(name);
  return it == params.end() ? "" : it->second;
}

std::string Request::Query(absl::string_view name) const {
  auto it = query.find(name);
  return it == query.end() ? "" : it->second;
}

Response Response::Json(unsigned status, const nlohmann::json& body) {
  Response r;
  r.status = status;
  // Replace, not throw, on invalid UTF-8: program output is not always text.
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

Response Response::Text(unsigned status, std::string body) {
  Response r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

std::string PercentDecode(absl::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && plus_is_space) {
      out += ' ';
    } else if (c == '%' && i + 2 < text.size() &&
               absl::ascii_isxdigit(text[i + 1]) && absl::ascii_isxdigit(text[i + 2])) {
      auto hex = [](char h) { return absl::ascii_isdigit(h) ? h - '0' : absl::ascii_tolower(h) - 'a' + 10; };
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace warden::http
