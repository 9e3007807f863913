#include "fronts/http/connection.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "boost/asio/write.hpp"
#include "boost/beast/http/empty_body.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/websocket/rfc6455.hpp"
#include "fronts/http/exchange.h"
#include "fronts/http/status.h"

namespace warden::http {

namespace bhttp = boost::beast::http;

namespace {

void ParseTarget(Request& request) {
  const beast::string_view target = request.raw.target();
  const absl::string_view t(target.data(), target.size());
  const size_t q = t.find('?');
  request.path = std::string(t.substr(0, q));
  if (q == absl::string_view::npos) return;
  for (absl::string_view pair : absl::StrSplit(t.substr(q + 1), '&', absl::SkipEmpty())) {
    const size_t eq = pair.find('=');
    std::string name = PercentDecode(pair.substr(0, eq), true);
    std::string value = eq == absl::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1), true);
    request.query.try_emplace(std::move(name), std::move(value));
  }
}

}  // namespace

Connection::Connection(net::io_context& io, net::ip::tcp::socket socket, const HttpServerOptions& options,
                       const Router& router, const AccessPolicy& access, const Authenticate& authenticate)
    : io_(io),
      stream_(std::move(socket)),
      options_(options),
      router_(router),
      access_(access),
      authenticate_(authenticate) {}

void Connection::SendError(Request& request, const Protocol* protocol, unsigned http_status,
                           const absl::Status& status, bool close) {
  Response response = protocol != nullptr && protocol->render_error
                          ? protocol->render_error(http_status, status, request)
                          : Response::Text(http_status, absl::StrCat(status.message(), "\n"));
  if (protocol == nullptr || !protocol->render_error_sets_status) response.status = http_status;
  if (close) request.raw.keep_alive(false);
  Exchange exchange(*this, request, access_.CorsHeaders(request, protocol));
  (void)exchange.Send(response);
}

bool Connection::AnswerPreflight(Request& request, const Router::Match& match) {
  const std::vector<std::string> methods = router_.MethodsAt(request.path);
  if (methods.empty()) {
    SendError(request, match.protocol, 404, absl::NotFoundError(absl::StrCat("no such endpoint: ", request.path)),
              false);
    return request.raw.keep_alive();
  }
  Exchange exchange(*this, request);
  return exchange.Send(access_.Preflight(request, match.protocol, methods)).ok() && !exchange.close_after();
}

void Connection::Serve() {
  ServeRequests();
  if (stream_.socket().is_open()) Linger();
}

void Connection::ServeRequests() {
  while (true) {
    bhttp::request_parser<bhttp::empty_body> head;
    head.header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
    // The route decides the body's limit, once the head is read.
    head.body_limit(std::numeric_limits<std::uint64_t>::max());
    beast::error_code ec = Await(options_.head_timeout, [&](auto done) {
      bhttp::async_read_header(stream_, buffer_, head, std::move(done));
    });
    Request request;
    request.raw.version(11);
    if (ec == bhttp::error::header_limit) {
      SendError(request, nullptr, 431,
                absl::InvalidArgumentError(absl::StrCat("the request head exceeds ", options_.max_header_bytes, " bytes")),
                true);
      return;
    }
    if (ec && ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
      SendError(request, nullptr, 400, absl::InvalidArgumentError(absl::StrCat("bad request: ", ec.message())), true);
      return;
    }
    if (ec) return;  // the client left, went quiet past the deadline, or the server stops

    // From here the parser holds a complete head; the body is still unread.
    static_cast<RawRequest::header_type&>(request.raw) = head.get().base();
    ParseTarget(request);
    if (!absl::StartsWith(request.path, "/")) {
      SendError(request, nullptr, 400,
                absl::InvalidArgumentError("bad request: the request target must be an absolute path"), true);
      return;
    }
    // A preflight asks about the method it names.
    const bool preflight = AccessPolicy::IsPreflight(request);
    Router::Match match =
        router_.Find(preflight ? request.Header("Access-Control-Request-Method") : request.method(), request.path);
    request.params = std::move(match.params);
    // Which hosts and origins may call, before anything else is done for
    // the request (its body is still unread: the connection then closes).
    if (absl::Status allowed = access_.Check(request); !allowed.ok()) {
      SendError(request, match.protocol, 403, allowed, true);
      return;
    }
    if (preflight) {
      if (head.content_length().value_or(0) != 0 || head.chunked()) {
        request.raw.keep_alive(false);  // a preflight has no body; do not read one
      }
      if (!AnswerPreflight(request, match)) return;
      continue;
    }
    if (match.route == nullptr) {
      // The body is left unread, so the connection cannot carry on.
      if (!match.allowed.empty()) {
        request.raw.keep_alive(false);
        if (std::find(match.allowed.begin(), match.allowed.end(), "GET") != match.allowed.end()) {
          match.allowed.push_back("HEAD");
        }
        Response response =
            match.protocol != nullptr && match.protocol->render_error
                ? match.protocol->render_error(
                      405, absl::InvalidArgumentError(absl::StrCat(request.method(), " is not served here; use ",
                                                                   absl::StrJoin(match.allowed, ", "))),
                      request)
                : Response::Text(405, absl::StrCat("method not allowed; use ", absl::StrJoin(match.allowed, ", "), "\n"));
        response.status = 405;
        response.With("Allow", absl::StrJoin(match.allowed, ", "));
        Exchange exchange(*this, request, access_.CorsHeaders(request, match.protocol));
        (void)exchange.Send(response);
        return;
      }
      SendError(request, match.protocol, 404, absl::NotFoundError(absl::StrCat("no such endpoint: ", request.path)),
                true);
      return;
    }

    const Route& route = *match.route;
    const size_t limit = route.options.max_body_bytes != 0 ? route.options.max_body_bytes : options_.max_body_bytes;
    const auto too_large = absl::ResourceExhaustedError(
        absl::StrCat("the request body exceeds ", limit, " bytes; send less at once"));
    if (head.content_length() && *head.content_length() > limit) {
      SendError(request, route.protocol.get(), 413, too_large, true);
      return;
    }
    if (absl::EqualsIgnoreCase(request.Header("Expect"), "100-continue")) {
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      ec = Await(options_.io_timeout, [&](auto done) {
        net::async_write(stream_, net::buffer(kContinue, sizeof(kContinue) - 1), std::move(done));
      });
      if (ec) return;
    }
    bhttp::request_parser<bhttp::string_body> full(std::move(head));
    full.body_limit(limit);
    ec = Await(options_.io_timeout, [&](auto done) { bhttp::async_read(stream_, buffer_, full, std::move(done)); });
    if (ec == bhttp::error::body_limit) {
      SendError(request, route.protocol.get(), 413, too_large, true);
      return;
    }
    if (ec && ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
      SendError(request, route.protocol.get(), 400,
                absl::InvalidArgumentError(absl::StrCat("bad request body: ", ec.message())), true);
      return;
    }
    if (ec) return;
    request.raw = full.release();

    // A refused upgrade ends the connection: the client expected to switch
    // protocols, not to send another request.
    const bool upgrade = boost::beast::websocket::is_upgrade(request.raw);
    if (route.protocol->find_token) request.token = route.protocol->find_token(request);
    if (route.options.authenticate) {
      absl::StatusOr<std::string> tenant = authenticate_(request.token);
      if (!tenant.ok()) {
        SendError(request, route.protocol.get(), 401, tenant.status(), upgrade);
        if (!request.raw.keep_alive()) return;
        continue;
      }
      request.tenant = *std::move(tenant);
    }

    Exchange exchange(*this, request, access_.CorsHeaders(request, route.protocol.get()));
    absl::Status handled;
    try {
      handled = route.handler(request, exchange);
    } catch (const std::exception& e) {
      // Handlers should not throw; a library that does must not take the daemon down.
      handled = absl::InternalError(absl::StrCat("the handler failed: ", e.what()));
    }
    if (exchange.upgraded()) return;
    if (!exchange.answered()) {
      if (handled.ok()) handled = absl::InternalError("the handler returned without answering");
      SendError(request, route.protocol.get(), HttpStatusFor(handled.code()), handled, upgrade);
      if (!request.raw.keep_alive()) return;
      continue;
    }
    if (exchange.close_after()) return;
  }
}

void Connection::Linger() {
  // Closing with request bytes unread (a body never read, a second request)
  // makes the kernel send RST, and the client could lose the answer it has
  // not read yet. Half-close instead and discard what the client still
  // sends until it closes too, or a short deadline passes.
  beast::error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  if (ec) return;
  const absl::Time deadline = absl::Now() + std::min(options_.head_timeout, absl::Seconds(2));
  char discard[4096];
  while (!ec) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return;
    ec = Await(left, [&](auto done) { stream_.async_read_some(net::buffer(discard), std::move(done)); });
  }
}

}  // namespace warden::http
