#include "fronts/ports/ports_front.h"

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "fronts/http/credentials.h"
#include "fronts/http/exchange.h"
#include "fronts/http/status.h"
#include "fronts/http/upstream.h"
#include "fronts/ports/port_tunnel.h"

namespace warden::ports {
namespace {

constexpr char kSandboxNotFound[] = "The sandbox was not found";

// The request head as the session's server gets it.
std::string Head(const http::Request& request, const std::string& target, const std::string& host,
                 const std::vector<std::string>& dropped) {
  http::RawRequest::header_type head = request.raw.base();
  head.target(target);
  if (!host.empty()) head.set(boost::beast::http::field::host, host);
  for (const std::string& name : dropped) head.erase(name);
  const bool upgrade = boost::beast::http::token_list(head[boost::beast::http::field::connection]).exists("upgrade");
  // One request per connection to the server (its answer then ends with
  // the connection), except an upgrade, which keeps it.
  if (!upgrade) head.set(boost::beast::http::field::connection, "close");
  std::string out = absl::StrCat(std::string(head.method_string()), " ", target, " HTTP/",
                                 head.version() / 10, ".", head.version() % 10, "\r\n");
  for (const auto& field : head) {
    absl::StrAppend(&out, std::string(field.name_string()), ": ", std::string(field.value()), "\r\n");
  }
  out += "\r\n";
  return out;
}

class Front {
 public:
  Front(v1::Executor::StubInterface* executor, PortsOptions options)
      : executor_(executor), options_(std::move(options)) {}

  absl::Status Serve(http::Request& request, http::Exchange& exchange, const std::string& id, int port,
                     const std::string& target) {
    // Which credential: E2B's or Warden's traffic token, else the tenant's.
    PortStream::Credential credential;
    std::vector<std::string> dropped = {"X-Warden-Traffic-Token", "e2b-traffic-access-token"};
    if (const std::string e2b = request.Header("e2b-traffic-access-token"); !e2b.empty()) {
      std::optional<std::string> key = options_.open_e2b_token ? options_.open_e2b_token(id, e2b) : std::nullopt;
      if (key) {
        credential.bearer = *key;
      } else {
        credential.traffic_token = e2b;
      }
    } else if (const std::string token = request.Header("X-Warden-Traffic-Token"); !token.empty()) {
      credential.traffic_token = token;
    } else if (const std::string bearer = http::BearerToken(request); !bearer.empty()) {
      credential.bearer = bearer;
      dropped.push_back("Authorization");
    }
    const bool anonymous = credential.bearer.empty() && credential.traffic_token.empty();
    auto stream = PortStream::Open(executor_, credential, id, port, absl::Now() + options_.open_timeout);
    if (!stream.ok()) {
      const absl::Status& s = stream.status();
      unsigned status = 502;
      std::string message(s.message());
      if (absl::IsNotFound(s)) {
        message = kSandboxNotFound;
      } else if (absl::IsPermissionDenied(s) || absl::IsUnauthenticated(s)) {
        status = anonymous ? 403 : (absl::IsUnauthenticated(s) ? 401 : 403);
        if (anonymous) {
          message = "this sandbox's ports need a token: send the tenant's (Authorization: Bearer) or the "
                    "sandbox's traffic token (X-Warden-Traffic-Token, or E2B's e2b-traffic-access-token)";
        }
      } else if (absl::IsInvalidArgument(s) || absl::IsFailedPrecondition(s)) {
        status = absl::IsInvalidArgument(s) ? 400 : 502;
      }
      return exchange.Send(http::Response::Json(status, {{"code", status}, {"message", message}, {"sandboxId", id}}));
    }
    const std::string head = Head(request, target, (*stream)->host_header(), dropped);
    // Its long-lived streams count as the session's (there may be no tenant).
    request.tenant = absl::StrCat("ports:", id);
    std::shared_ptr<PortStream> tunnel = *std::move(stream);
    return exchange.TakeConnection([tunnel, head](boost::beast::tcp_stream client, std::string leftover,
                                                  std::shared_ptr<void> keep) mutable {
      return tunnel->Start(std::move(client), head + leftover, std::move(keep));
    });
  }

 private:
  v1::Executor::StubInterface* const executor_;
  const PortsOptions options_;
};

}  // namespace

bool ParsePortHost(absl::string_view host, const std::string& domain, std::string* session_id, int* port) {
  if (domain.empty()) return false;
  std::string name = absl::AsciiStrToLower(host);
  if (const size_t colon = name.rfind(':'); colon != std::string::npos && name.find(']') == std::string::npos) {
    name.resize(colon);
  }
  const std::string suffix = absl::StrCat(".", absl::AsciiStrToLower(domain));
  if (!absl::EndsWith(name, suffix)) return false;
  const std::string label = name.substr(0, name.size() - suffix.size());  // "<port>-<id>"
  const size_t dash = label.find('-');
  if (dash == std::string::npos || label.find('.') != std::string::npos) return false;
  int p = 0;
  if (!absl::SimpleAtoi(label.substr(0, dash), &p) || p < 1 || p > 65535) return false;
  *session_id = label.substr(dash + 1);
  *port = p;
  return !session_id->empty();
}

void AddPortRoutes(http::Router& router, v1::Executor::StubInterface* executor, PortsOptions options) {
  auto protocol = std::make_shared<http::Protocol>();
  protocol->name = "ports";
  protocol->render_error = [](unsigned status, const absl::Status& error, const http::Request& request) {
    return http::Response::Json(status, {{"code", status}, {"message", std::string(error.message())}});
  };
  auto front = std::make_shared<Front>(executor, options);
  http::RouteOptions raw;
  raw.raw = true;
  raw.authenticate = false;  // the session's own credentials, checked by ConnectPort
  const std::string domain = options.sandbox_domain;
  if (!domain.empty()) {
    router.AddHost(
        protocol,
        [domain](absl::string_view host, absl::flat_hash_map<std::string, std::string>* params) {
          std::string id;
          int port = 0;
          if (!ParsePortHost(host, domain, &id, &port)) return false;
          (*params)["id"] = id;
          (*params)["port"] = absl::StrCat(port);
          return true;
        },
        [front](http::Request& request, http::Exchange& exchange) {
          int port = 0;
          (void)absl::SimpleAtoi(request.Param("port"), &port);
          return front->Serve(request, exchange, request.Param("id"), port, std::string(request.raw.target()));
        },
        raw);
  }
  // The path form: /ports/<id>/<port>[/<path...>], every method.
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    for (const char* pattern : {"/ports/{id}/{port}", "/ports/{id}/{port}/{rest...}"}) {
      router.Add(protocol, method, pattern,
                 [front](http::Request& request, http::Exchange& exchange) {
                   int port = 0;
                   if (!absl::SimpleAtoi(request.Param("port"), &port) || port < 1 || port > 65535) {
                     return absl::InvalidArgumentError("the port must be a number, 1 to 65535: /ports/<id>/<port>/...");
                   }
                   const std::string target(request.raw.target());
                   const std::string prefix = absl::StrCat("/ports/", request.Param("id"), "/", request.Param("port"));
                   std::string rest = target.substr(std::min(target.size(), prefix.size()));
                   if (rest.empty() || rest[0] != '/') rest = "/" + rest;
                   return front->Serve(request, exchange, request.Param("id"), port, rest);
                 },
                 raw);
    }
  }
  router.Claim(protocol, "/ports");
}

}  // namespace warden::ports
