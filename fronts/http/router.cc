#include "fronts/http/router.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace warden::http {
namespace {

std::vector<std::string> Segments(absl::string_view path) {
  // "/a/b" -> {"a", "b"}; "/" -> {}; a trailing slash gives an empty last segment.
  if (absl::StartsWith(path, "/")) path.remove_prefix(1);
  if (path.empty()) return {};
  return absl::StrSplit(path, '/');
}

bool IsParam(absl::string_view s) { return s.size() > 2 && s.front() == '{' && s.back() == '}'; }
bool IsRest(absl::string_view s) { return IsParam(s) && absl::EndsWith(s, "...}"); }
std::string ParamName(absl::string_view s) {
  s = s.substr(1, s.size() - 2);
  if (absl::EndsWith(s, "...")) s.remove_suffix(3);
  return std::string(s);
}

// How well `route` fits `path`: -1 when it does not, else a score where
// literal segments count more than parameters.
int Fit(const std::vector<std::string>& pattern, const std::vector<std::string>& path,
        absl::flat_hash_map<std::string, std::string>* params) {
  int score = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const std::string& p = pattern[i];
    if (IsRest(p)) {
      if (i >= path.size()) return -1;
      std::vector<absl::string_view> rest(path.begin() + i, path.end());
      (*params)[ParamName(p)] = PercentDecode(absl::StrJoin(rest, "/"), false);
      return score;
    }
    if (i >= path.size()) return -1;
    if (IsParam(p)) {
      if (path[i].empty()) return -1;
      (*params)[ParamName(p)] = PercentDecode(path[i], false);
      score += 1;
    } else if (p == path[i]) {
      score += 2;
    } else {
      return -1;
    }
  }
  return pattern.size() == path.size() ? score : -1;
}

}  // namespace

void Router::Add(std::shared_ptr<const Protocol> protocol, std::string method, absl::string_view pattern,
                 Handler handler, RouteOptions options) {
  routes_.push_back(Route{std::move(protocol), std::move(method), Segments(pattern), std::move(handler), options});
}

void Router::Claim(std::shared_ptr<const Protocol> protocol, std::string prefix) {
  claims_.emplace_back(std::move(prefix), std::move(protocol));
}

void Router::AddHost(std::shared_ptr<const Protocol> protocol, HostMatch match, Handler handler,
                     RouteOptions options) {
  Route route;
  route.protocol = std::move(protocol);
  route.method = "*";
  route.handler = std::move(handler);
  route.options = options;
  host_route_ = std::move(route);
  host_match_ = std::move(match);
}

const Route* Router::FindByHost(absl::string_view host,
                                absl::flat_hash_map<std::string, std::string>* params) const {
  if (!host_route_ || host.empty()) return nullptr;
  return host_match_(host, params) ? &*host_route_ : nullptr;
}

Router::Match Router::Find(absl::string_view method, absl::string_view path) const {
  Match match;
  const std::vector<std::string> segments = Segments(path);
  int best = -1;
  for (const Route& route : routes_) {
    absl::flat_hash_map<std::string, std::string> params;
    const int fit = Fit(route.segments, segments, &params);
    if (fit < 0) continue;
    const bool method_fits = route.method == method || (method == "HEAD" && route.method == "GET");
    if (!method_fits) {
      if (std::find(match.allowed.begin(), match.allowed.end(), route.method) == match.allowed.end()) {
        match.allowed.push_back(route.method);
      }
      if (match.protocol == nullptr) match.protocol = route.protocol.get();
      continue;
    }
    if (fit > best) {
      best = fit;
      match.route = &route;
      match.params = std::move(params);
      match.protocol = route.protocol.get();
    }
  }
  if (match.route != nullptr || match.protocol != nullptr) return match;
  size_t longest = 0;
  for (const auto& [prefix, protocol] : claims_) {
    const bool under = prefix == "/" || path == prefix || absl::StartsWith(path, prefix + "/");
    if (under && prefix.size() >= longest) {
      longest = prefix.size();
      match.protocol = protocol.get();
    }
  }
  return match;
}

std::vector<std::string> Router::MethodsAt(absl::string_view path) const {
  std::vector<std::string> methods;
  const std::vector<std::string> segments = Segments(path);
  for (const Route& route : routes_) {
    absl::flat_hash_map<std::string, std::string> params;
    if (Fit(route.segments, segments, &params) < 0) continue;
    if (std::find(methods.begin(), methods.end(), route.method) == methods.end()) methods.push_back(route.method);
  }
  if (std::find(methods.begin(), methods.end(), "GET") != methods.end() &&
      std::find(methods.begin(), methods.end(), "HEAD") == methods.end()) {
    methods.push_back("HEAD");
  }
  return methods;
}

}  // namespace warden::http
