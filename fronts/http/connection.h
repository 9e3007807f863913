// Connection: one client connection of the HttpServer, driven by the
// server's I/O threads through its own strand, never holding a thread while
// it waits: read a request head (head_timeout; idle_timeout for the first
// byte of the next one on a kept-alive connection), apply the access policy,
// route, read the body (bounded, io_timeout), authenticate, run the route's
// handler on the handler pool (or on the strand for a nonblocking route),
// repeat while the client keeps the connection alive. Internal to
// fronts/http; handlers see only Request and Exchange.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/http/empty_body.hpp"
#include "boost/beast/http/parser.hpp"
#include "fronts/http/connection_table.h"
#include "fronts/http/router.h"
#include "fronts/http/server.h"
#include "fronts/http/tenant_streams.h"
#include "fronts/http/work_pool.h"

namespace warden::http {

namespace net = boost::asio;
namespace beast = boost::beast;

class WebSocket;
class Hangup;

// What every connection of one server shares; owned by the server and by
// each connection (it outlives the last one).
struct ServerShared {
  ServerShared(HttpServerOptions options, std::shared_ptr<const Router> router, Authenticate authenticate,
               int io_threads);
  HttpServerOptions options;
  std::shared_ptr<const Router> router;
  AccessPolicy access;
  Authenticate authenticate;
  net::io_context io;
  WorkPool pool;
  std::shared_ptr<TenantStreams> streams;
  ConnectionTable table;
  // The request bodies held now, against options.max_body_bytes_in_flight.
  std::atomic<size_t> body_bytes{0};
  // `n` bytes of it for one body, given back when the result is dropped;
  // null when they would pass the bound.
  std::shared_ptr<void> ReserveBody(size_t n);
};

// Completes one asynchronous operation: `start` begins it on the stream and
// calls `done` when it completes, with the error or success.
using Done = std::function<void(beast::error_code)>;
using StartOp = std::function<void(beast::tcp_stream&, Done)>;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<ServerShared> shared, net::ip::tcp::socket socket);
  ~Connection();

  // Starts serving; any thread.
  void Start();
  // Ends the connection (eviction, Stop): pending reads and writes fail at
  // once, a handler's next write fails, a WebSocket closes. Any thread.
  void Close();

  // ---- For Exchange, ResponseStream and WebSocket.
  // On a handler thread: runs `start` on the strand with the stream's
  // deadline io_timeout from now and waits for it to complete. `keep` is
  // held until then (the buffers the operation reads).
  beast::error_code RunAndWait(StartOp start, std::shared_ptr<const void> keep);
  // On a handler thread: hands the stream to `take` on the strand (the
  // WebSocket upgrade), and waits for `take`'s own completion. Not called
  // (operation_aborted) when the connection was closed first.
  beast::error_code HandOver(absl::AnyInvocable<void(beast::tcp_stream, Done) &&> take);
  // On a handler thread: hands the stream and the bytes read past the
  // request head to `take` on the strand (a raw route), and keeps what
  // `take` returns, to call when the connection is closed (Stop).
  beast::error_code HandOverRaw(absl::AnyInvocable<std::function<void()>(beast::tcp_stream, std::string) &&> take);
  // The WebSocket this connection became; closed by Close().
  void SetWebSocket(std::weak_ptr<WebSocket> socket);
  // While a response streams: tells `hangup` when the client closes or
  // resets the connection, and closes it then (Hangup, exchange.h).
  void WatchForHangup(std::shared_ptr<Hangup> hangup);

  ServerShared& shared() { return *shared_; }
  const HttpServerOptions& options() const { return shared_->options; }

 private:
  // The strand's own steps, in the order a request meets them.
  void ReadHead(bool fresh);
  void ReadHeadNow();
  void OnHead(beast::error_code ec);
  void ReadBody();
  void OnBody(beast::error_code ec);
  void RunRaw();
  void RunHandler();  // a pool thread, or the strand for nonblocking routes
  struct Handled {
    absl::Status status;
    bool answered = false;
    bool upgraded = false;
    bool close_after = false;
    std::optional<Response> answer;  // what Send was given, written from the strand
  };
  void OnHandled(Handled handled);
  // Answers from the strand, then reads the next request (or closes).
  void Answer(Response response, bool close);
  void AnswerError(const Protocol* protocol, unsigned http_status, const absl::Status& status, bool close);
  void AfterAnswer(beast::error_code ec, bool keep_alive);
  void Linger();
  void Finish();
  void AwaitHangup(std::shared_ptr<Hangup> hangup);  // on the strand

  const std::shared_ptr<ServerShared> shared_;
  // Its place in shared_->table; destroyed after the members below.
  ConnectionTable::Member member_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<beast::http::request_parser<beast::http::empty_body>> head_;
  std::optional<beast::http::request_parser<beast::http::string_body>> body_;
  std::shared_ptr<Request> request_;  // the request being served
  const Route* route_ = nullptr;
  const Protocol* protocol_ = nullptr;  // the route's, or the claiming one
  std::vector<std::pair<std::string, std::string>> cors_;  // for every answer to request_
  bool closed_ = false;                                    // on the strand
  bool upgraded_ = false;                                  // on the strand
  std::weak_ptr<WebSocket> websocket_;                     // on the strand
  std::shared_ptr<void> body_reservation_;                 // on the strand: request_'s body's bytes
  std::function<void()> close_raw_;                        // on the strand: a raw route's taker's
};

// The Beast message an answer is sent as: `response` with Server, the
// request's keep-alive (false when `close`), `extra` headers, and the
// payload's length.
beast::http::response<beast::http::string_body> MakeMessage(
    Response response, const Request& request,
    const std::vector<std::pair<std::string, std::string>>& extra, bool close);

}  // namespace warden::http
