// Request and Response: one HTTP exchange as a handler of the HTTP front
// sees it (fronts/http/server.h explains how handlers plug in).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "boost/beast/http/message.hpp"
#include "boost/beast/http/string_body.hpp"
#include "nlohmann/json.hpp"

namespace warden::http {

using RawRequest = boost::beast::http::request<boost::beast::http::string_body>;

struct Request {
  RawRequest raw;    // method, target, header fields and the whole body
  std::string path;  // the target up to '?', still percent-encoded
  absl::flat_hash_map<std::string, std::string> query;   // decoded; the first of repeats
  absl::flat_hash_map<std::string, std::string> params;  // the route's {names}, decoded
  std::string token;   // the credential the protocol found; "" if none
  std::string tenant;  // who the token belongs to (authenticated routes)

  absl::string_view method() const { return {raw.method_string().data(), raw.method_string().size()}; }
  const std::string& body() const { return raw.body(); }
  // A header field's value, "" when absent; names are case-insensitive.
  std::string Header(absl::string_view name) const;
  std::string Param(absl::string_view name) const;
  std::string Query(absl::string_view name) const;
};

struct Response {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beyond Content-Type/Length
  bool close = false;  // end the connection after this answer

  static Response Json(unsigned status, const nlohmann::json& body);
  static Response Text(unsigned status, std::string body);
  Response& With(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
    return *this;
  }
};

// "%41b+c" -> "Ab c" (with plus_is_space, as in a query). Malformed escapes
// stay as they are.
std::string PercentDecode(absl::string_view text, bool plus_is_space);

}  // namespace warden::http
