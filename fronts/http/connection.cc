#include "fronts/http/connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/write.hpp"
#include "boost/beast/websocket/rfc6455.hpp"
#include "fronts/http/exchange.h"
#include "fronts/http/status.h"
#include "fronts/http/websocket.h"

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

// A parse failure that is the client's fault (as opposed to it leaving).
bool IsBadRequest(const beast::error_code& ec) {
  return ec && ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
         ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message;
}

// One operation's completion, for a handler thread to wait on.
struct Completion {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  beast::error_code ec ABSL_GUARDED_BY(mu);
  void Set(beast::error_code e) {
    absl::MutexLock lock(&mu);
    ec = e;
    done = true;
  }
  // The result, or timed_out if none came by `deadline` (the operation's
  // own deadline passed long before; the connection is then closed).
  beast::error_code Wait(absl::Time deadline) {
    absl::MutexLock lock(&mu);
    if (!mu.AwaitWithDeadline(absl::Condition(&done), deadline)) return net::error::timed_out;
    return ec;
  }
};

}  // namespace

bhttp::response<bhttp::string_body> MakeMessage(Response response, const Request& request,
                                                const std::vector<std::pair<std::string, std::string>>& extra,
                                                bool close) {
  // Always 1.1 in the status line, our version (RFC 9110 6.2), whatever the client's.
  bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(response.status), 11};
  res.set(bhttp::field::server, "wardend");
  if (!response.content_type.empty()) res.set(bhttp::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) res.insert(name, value);
  for (const auto& [name, value] : extra) res.insert(name, value);
  res.body() = std::move(response.body);
  res.keep_alive(request.raw.keep_alive() && !close && !response.close);
  res.prepare_payload();
  return res;
}

Connection::Connection(std::shared_ptr<ServerShared> shared, net::ip::tcp::socket socket)
    : shared_(std::move(shared)), stream_(std::move(socket)) {}

Connection::~Connection() = default;  // member_ leaves the table last

void Connection::Start() {
  shared_->table.Add(shared_from_this(), &member_);
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHead(/*fresh=*/true); });
}

void Connection::Close() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    self->closed_ = true;
    if (std::shared_ptr<WebSocket> ws = self->websocket_.lock()) {
      ws->Abort();
      return;
    }
    if (self->close_raw_) {
      auto close = std::move(self->close_raw_);
      self->close_raw_ = nullptr;
      close();
      return;
    }
    if (self->upgraded_) return;  // the stream went to the WebSocket
    beast::error_code ignored;
    self->stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    self->stream_.close();  // pending operations complete with operation_aborted
  });
}

void Connection::SetWebSocket(std::weak_ptr<WebSocket> socket) {
  net::dispatch(stream_.get_executor(), [self = shared_from_this(), socket = std::move(socket)] {
    self->websocket_ = socket;
    if (self->closed_) {  // Stop came first
      if (std::shared_ptr<WebSocket> ws = socket.lock()) ws->Abort();
    }
  });
}

void Connection::WatchForHangup(std::shared_ptr<Hangup> hangup) {
  net::dispatch(stream_.get_executor(), [self = shared_from_this(), hangup = std::move(hangup)]() mutable {
    if (self->closed_) {
      hangup->Fire();
      return;
    }
    self->AwaitHangup(std::move(hangup));
  });
}

void Connection::AwaitHangup(std::shared_ptr<Hangup> hangup) {
  // Readable: bytes, or the end of the stream (or an error). Only peeked:
  // a pipelined request stays for the parser.
  stream_.socket().async_wait(net::socket_base::wait_read,
                              [self = shared_from_this(), hangup = std::move(hangup)](beast::error_code ec) mutable {
                                char byte;
                                ssize_t n = -1;
                                int err = 0;
                                if (!ec) {
                                  n = ::recv(self->stream_.socket().native_handle(), &byte, 1,
                                             MSG_PEEK | MSG_DONTWAIT);
                                  err = n < 0 ? errno : 0;
                                }
                                if (!ec && n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) {
                                  return self->AwaitHangup(std::move(hangup));  // spurious
                                }
                                if (!ec && n > 0) return;  // the client sent more: not watched further
                                // The end (0), a reset, or our own close.
                                if (!hangup->Fire() || self->closed_) return;
                                self->closed_ = true;
                                beast::error_code ignored;
                                self->stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
                                self->stream_.close();
                              });
}

// ---- Reading a request

void Connection::ReadHead(bool fresh) {
  if (closed_) return Finish();
  shared_->table.SetWaiting(shared_from_this(), &member_, true);
  request_.reset();
  body_reservation_.reset();
  route_ = nullptr;
  protocol_ = nullptr;
  cors_.clear();
  if (!fresh && buffer_.size() == 0) {
    // Idle on a kept-alive connection: a small read, no parser, until the
    // next request's first bytes (or idle_timeout).
    buffer_.shrink_to_fit();
    stream_.expires_after(absl::ToChronoNanoseconds(options().idle_timeout));
    stream_.async_read_some(buffer_.prepare(512), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->Finish();  // left, idle too long, or closed
      self->buffer_.commit(n);
      self->ReadHeadNow();
    });
    return;
  }
  ReadHeadNow();
}

void Connection::ReadHeadNow() {
  head_.emplace();
  head_->header_limit(static_cast<std::uint32_t>(options().max_header_bytes));
  // The route decides the body's limit, once the head is read.
  head_->body_limit(std::numeric_limits<std::uint64_t>::max());
  stream_.expires_after(absl::ToChronoNanoseconds(options().head_timeout));
  bhttp::async_read_header(stream_, buffer_, *head_,
                           [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHead(ec); });
}

void Connection::OnHead(beast::error_code ec) {
  shared_->table.SetWaiting(shared_from_this(), &member_, false);
  request_ = std::make_shared<Request>();
  Request& request = *request_;
  request.raw.version(11);
  if (ec == bhttp::error::header_limit) {
    return AnswerError(nullptr, 431,
                       absl::InvalidArgumentError(
                           absl::StrCat("the request head exceeds ", options().max_header_bytes, " bytes")),
                       true);
  }
  if (IsBadRequest(ec)) {
    return AnswerError(nullptr, 400, absl::InvalidArgumentError(absl::StrCat("bad request: ", ec.message())), true);
  }
  if (ec) return Finish();  // the client left, went quiet past the deadline, or the server stops

  // From here the parser holds a complete head; the body is still unread.
  static_cast<RawRequest::header_type&>(request.raw) = head_->get().base();
  ParseTarget(request);
  if (!absl::StartsWith(request.path, "/")) {
    return AnswerError(nullptr, 400,
                       absl::InvalidArgumentError("bad request: the request target must be an absolute path"), true);
  }
  const Router& router = *shared_->router;
  // A server named by its Host (an exposed port) takes every request for
  // that Host, preflights included: it is the sandbox's server, which
  // answers for its own origin, behind the route's own credentials.
  if (const Route* by_host = router.FindByHost(request.Header("Host"), &request.params)) {
    route_ = by_host;
    protocol_ = by_host->protocol.get();
    return RunRaw();
  }
  // A preflight asks about the method it names.
  const bool preflight = AccessPolicy::IsPreflight(request);
  Router::Match match =
      router.Find(preflight ? request.Header("Access-Control-Request-Method") : request.method(), request.path);
  request.params = std::move(match.params);
  route_ = match.route;
  protocol_ = match.protocol;
  // Which hosts and origins may call, before anything else is done for the
  // request (its body is still unread: the connection then closes).
  if (absl::Status allowed = shared_->access.Check(request); !allowed.ok()) {
    return AnswerError(protocol_, 403, allowed, true);
  }
  cors_ = shared_->access.CorsHeaders(request, protocol_);
  const bool has_body = head_->content_length().value_or(0) != 0 || head_->chunked();
  if (preflight) {
    const std::vector<std::string> methods = router.MethodsAt(request.path);
    if (methods.empty()) {
      return AnswerError(protocol_, 404, absl::NotFoundError(absl::StrCat("no such endpoint: ", request.path)),
                         has_body);
    }
    cors_.clear();  // the preflight's own headers say it all
    return Answer(shared_->access.Preflight(request, protocol_, methods), /*close=*/has_body);
  }
  if (route_ == nullptr) {
    // The body is left unread, so the connection cannot carry on.
    if (!match.allowed.empty()) {
      if (std::find(match.allowed.begin(), match.allowed.end(), "GET") != match.allowed.end()) {
        match.allowed.push_back("HEAD");
      }
      const absl::Status status = absl::InvalidArgumentError(
          absl::StrCat(request.method(), " is not served here; use ", absl::StrJoin(match.allowed, ", ")));
      Response response = protocol_ != nullptr && protocol_->render_error
                              ? protocol_->render_error(405, status, request)
                              : Response::Text(405, absl::StrCat("method not allowed; use ",
                                                                 absl::StrJoin(match.allowed, ", "), "\n"));
      response.status = 405;
      response.With("Allow", absl::StrJoin(match.allowed, ", "));
      return Answer(std::move(response), true);
    }
    return AnswerError(protocol_, 404, absl::NotFoundError(absl::StrCat("no such endpoint: ", request.path)), true);
  }

  if (route_->options.raw) return RunRaw();
  const size_t limit =
      route_->options.max_body_bytes != 0 ? route_->options.max_body_bytes : options().max_body_bytes;
  if (head_->content_length() && *head_->content_length() > limit) {
    return AnswerError(route_->protocol.get(), 413,
                       absl::ResourceExhaustedError(
                           absl::StrCat("the request body exceeds ", limit, " bytes; send less at once")),
                       true);
  }
  // What the body will hold in memory, counted against every connection's
  // bodies together before a byte of it is read.
  const size_t body = head_->content_length() ? static_cast<size_t>(*head_->content_length())
                      : head_->chunked()      ? limit
                                              : 0;
  if (body > 0) {
    body_reservation_ = shared_->ReserveBody(body);
    if (!body_reservation_) {
      return AnswerError(route_->protocol.get(), 503,
                         absl::UnavailableError(absl::StrCat(
                             "the server holds ", shared_->options.max_body_bytes_in_flight >> 20,
                             " MiB of request bodies already, the most it takes at once; try again in a moment")),
                         true);
    }
  }
  if (absl::EqualsIgnoreCase(request.Header("Expect"), "100-continue")) {
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    stream_.expires_after(absl::ToChronoNanoseconds(options().io_timeout));
    net::async_write(stream_, net::buffer(kContinue, sizeof(kContinue) - 1),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->Finish();
                       self->ReadBody();
                     });
    return;
  }
  ReadBody();
}

void Connection::ReadBody() {
  const size_t limit =
      route_->options.max_body_bytes != 0 ? route_->options.max_body_bytes : options().max_body_bytes;
  body_.emplace(std::move(*head_));
  head_.reset();
  body_->body_limit(limit);
  stream_.expires_after(absl::ToChronoNanoseconds(options().io_timeout));
  bhttp::async_read(stream_, buffer_, *body_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->OnBody(ec);
  });
}

void Connection::OnBody(beast::error_code ec) {
  Request& request = *request_;
  const Protocol* protocol = route_->protocol.get();
  if (ec == bhttp::error::body_limit) {
    const size_t limit =
        route_->options.max_body_bytes != 0 ? route_->options.max_body_bytes : options().max_body_bytes;
    return AnswerError(protocol, 413,
                       absl::ResourceExhaustedError(
                           absl::StrCat("the request body exceeds ", limit, " bytes; send less at once")),
                       true);
  }
  if (IsBadRequest(ec)) {
    return AnswerError(protocol, 400, absl::InvalidArgumentError(absl::StrCat("bad request body: ", ec.message())),
                       true);
  }
  if (ec) return Finish();
  request.raw = body_->release();
  body_.reset();
  // A refused upgrade ends the connection: the client expected to switch
  // protocols, not to send another request.
  const bool upgrade = boost::beast::websocket::is_upgrade(request.raw);
  if (protocol->find_token) request.token = protocol->find_token(request);
  if (route_->options.authenticate) {
    absl::StatusOr<std::string> tenant = shared_->authenticate(request.token);
    if (!tenant.ok()) return AnswerError(protocol, 401, tenant.status(), upgrade);
    request.tenant = *std::move(tenant);
  }
  if (!route_->options.authenticate && route_->options.tenant_of) request.tenant = route_->options.tenant_of(request);
  if (route_->options.nonblocking) return RunHandler();
  // In the tenant's own line: its share of the threads, served in turn.
  if (!shared_->pool.Submit([self = shared_from_this()] { self->RunHandler(); }, request.tenant)) {
    Finish();  // stopping
  }
}

// A raw route: its handler runs with the head alone (the body, if any, is
// still unread: the handler answers and closes, or takes the connection).
void Connection::RunRaw() {
  Request& request = *request_;
  const Protocol* protocol = route_->protocol.get();
  if (protocol->find_token) request.token = protocol->find_token(request);
  if (route_->options.authenticate) {
    absl::StatusOr<std::string> tenant = shared_->authenticate(request.token);
    if (!tenant.ok()) return AnswerError(protocol, 401, tenant.status(), true);
    request.tenant = *std::move(tenant);
  }
  if (!shared_->pool.Submit([self = shared_from_this()] { self->RunHandler(); })) Finish();
}

// ---- Running the handler

void Connection::RunHandler() {
  const bool on_strand = route_->options.nonblocking;
  Handled handled;
  {
    Exchange exchange(*this, *request_, cors_, /*on_io_thread=*/on_strand);
    try {
      handled.status = route_->handler(*request_, exchange);
    } catch (const std::exception& e) {
      // Handlers should not throw; a library that does must not take the daemon down.
      handled.status = absl::InternalError(absl::StrCat("the handler failed: ", e.what()));
    }
    handled.answered = exchange.answered();
    handled.upgraded = exchange.upgraded();
    handled.close_after = exchange.close_after();
    handled.answer = exchange.TakeAnswer();
  }
  if (on_strand) return OnHandled(std::move(handled));
  net::post(stream_.get_executor(),
            [self = shared_from_this(), handled = std::move(handled)]() mutable { self->OnHandled(std::move(handled)); });
}

void Connection::OnHandled(Handled handled) {
  if (handled.upgraded) {
    upgraded_ = true;  // the WebSocket owns the stream now, and this connection
    request_.reset();
    return;
  }
  // A raw route's body is unread: the connection cannot carry on after it.
  const bool raw = route_->options.raw;
  if (handled.answer) return Answer(*std::move(handled.answer), raw);
  if (!handled.answered) {
    if (handled.status.ok()) handled.status = absl::InternalError("the handler returned without answering");
    const bool upgrade = boost::beast::websocket::is_upgrade(request_->raw);
    return AnswerError(route_->protocol.get(), HttpStatusFor(handled.status.code()), handled.status, upgrade || raw);
  }
  if (handled.close_after || closed_) return Linger();
  ReadHead(/*fresh=*/false);
}

// ---- Answering from the strand

void Connection::AnswerError(const Protocol* protocol, unsigned http_status, const absl::Status& status, bool close) {
  Request& request = *request_;
  Response response = protocol != nullptr && protocol->render_error
                          ? protocol->render_error(http_status, status, request)
                          : Response::Text(http_status, absl::StrCat(status.message(), "\n"));
  if (protocol == nullptr || !protocol->render_error_sets_status) response.status = http_status;
  if (response.status == 429 || response.status == 503) {
    if (std::optional<int64_t> after = RetryAfterSeconds(status)) response.With("Retry-After", absl::StrCat(*after));
  }
  if (cors_.empty()) cors_ = shared_->access.CorsHeaders(request, protocol);
  Answer(std::move(response), close);
}

void Connection::Answer(Response response, bool close) {
  struct Job {
    explicit Job(bhttp::response<bhttp::string_body> m) : message(std::move(m)), serializer(message) {}
    bhttp::response<bhttp::string_body> message;
    bhttp::response_serializer<bhttp::string_body> serializer;
  };
  auto job = std::make_shared<Job>(MakeMessage(std::move(response), *request_, cors_, close));
  const bool keep_alive = job->message.keep_alive();
  stream_.expires_after(absl::ToChronoNanoseconds(options().io_timeout));
  auto done = [self = shared_from_this(), job, keep_alive](beast::error_code ec, size_t) {
    self->AfterAnswer(ec, keep_alive);
  };
  if (request_->raw.method() == bhttp::verb::head) {
    bhttp::async_write_header(stream_, job->serializer, std::move(done));
  } else {
    bhttp::async_write(stream_, job->serializer, std::move(done));
  }
}

void Connection::AfterAnswer(beast::error_code ec, bool keep_alive) {
  if (ec) return Finish();
  if (!keep_alive || closed_) return Linger();
  ReadHead(/*fresh=*/false);
}

void Connection::Linger() {
  // Closing with request bytes unread (a body never read, a second request)
  // makes the kernel send RST, and the client could lose the answer it has
  // not read yet. Half-close instead and discard what the client still
  // sends until it closes too, or a short deadline passes.
  request_.reset();
  body_reservation_.reset();
  beast::error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  if (ec || closed_) return Finish();
  stream_.expires_after(absl::ToChronoNanoseconds(std::min(options().head_timeout, absl::Seconds(2))));
  struct Drain {
    std::shared_ptr<Connection> self;
    void operator()(beast::error_code ec, size_t) {
      Connection& c = *self;
      if (ec) return c.Finish();
      c.buffer_.consume(c.buffer_.size());
      c.stream_.async_read_some(c.buffer_.prepare(512), Drain{std::move(self)});
    }
  };
  Drain{shared_from_this()}(beast::error_code{}, 0);
}

void Connection::Finish() {
  shared_->table.SetWaiting(shared_from_this(), &member_, false);
  body_reservation_.reset();
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
  request_.reset();
  head_.reset();
  body_.reset();
  // The last completion handler holding this connection returns, and with
  // it the connection is destroyed and leaves the table.
}

// ---- For handler threads

beast::error_code Connection::RunAndWait(StartOp start, std::shared_ptr<const void> keep) {
  auto completion = std::make_shared<Completion>();
  net::dispatch(stream_.get_executor(), [self = shared_from_this(), start = std::move(start), keep = std::move(keep),
                                         completion]() mutable {
    if (self->closed_) return completion->Set(net::error::operation_aborted);
    self->stream_.expires_after(absl::ToChronoNanoseconds(self->options().io_timeout));
    start(self->stream_, [completion, keep = std::move(keep)](beast::error_code ec) { completion->Set(ec); });
  });
  beast::error_code ec = completion->Wait(absl::Now() + options().io_timeout + absl::Seconds(30));
  if (ec == net::error::timed_out) Close();
  return ec;
}

beast::error_code Connection::HandOverRaw(
    absl::AnyInvocable<std::function<void()>(beast::tcp_stream, std::string) &&> take) {
  auto completion = std::make_shared<Completion>();
  net::dispatch(stream_.get_executor(), [self = shared_from_this(), take = std::move(take), completion]() mutable {
    if (self->closed_) return completion->Set(net::error::operation_aborted);
    self->upgraded_ = true;
    self->stream_.expires_never();
    const auto data = self->buffer_.data();
    std::string leftover(static_cast<const char*>(data.data()), data.size());
    self->buffer_.consume(self->buffer_.size());
    self->close_raw_ = std::move(take)(std::move(self->stream_), std::move(leftover));
    completion->Set({});
  });
  return completion->Wait(absl::Now() + options().io_timeout + absl::Seconds(30));
}

beast::error_code Connection::HandOver(absl::AnyInvocable<void(beast::tcp_stream, Done) &&> take) {
  auto completion = std::make_shared<Completion>();
  net::dispatch(stream_.get_executor(), [self = shared_from_this(), take = std::move(take), completion]() mutable {
    if (self->closed_) return completion->Set(net::error::operation_aborted);
    self->upgraded_ = true;
    self->stream_.expires_never();
    std::move(take)(std::move(self->stream_), [completion](beast::error_code ec) { completion->Set(ec); });
  });
  beast::error_code ec = completion->Wait(absl::Now() + options().io_timeout + absl::Seconds(30));
  return ec;
}

}  // namespace warden::http
