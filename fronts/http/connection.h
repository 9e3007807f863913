// Connection: one client connection of the HttpServer, served on a thread
// of its own: read a request (bounded, with deadlines), route, authenticate,
// run the handler, repeat while the client keeps the connection alive.
// Internal to fronts/http; handlers see only Request and Exchange.
//
// Each connection has its own io_context, run by its thread only while an
// operation is outstanding, so the code reads like blocking I/O yet every
// read and write has a deadline (beast::tcp_stream's expiry).
#pragma once

#include <string>

#include "absl/time/time.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "fronts/http/router.h"
#include "fronts/http/server.h"

namespace warden::http {

namespace net = boost::asio;
namespace beast = boost::beast;

class Connection {
 public:
  Connection(net::io_context& io, net::ip::tcp::socket socket, const HttpServerOptions& options,
             const Router& router, const AccessPolicy& access, const Authenticate& authenticate);

  // Serves requests until the client closes, a deadline passes, an answer
  // says close, or the socket is shut down from outside (HttpServer::Stop).
  void Serve();

  // Runs one asynchronous operation to completion on this thread, with the
  // stream's expiry `timeout` from now. `start` takes a completion handler.
  template <class Start>
  beast::error_code Await(absl::Duration timeout, Start&& start) {
    beast::error_code result = net::error::operation_aborted;
    stream_.expires_after(absl::ToChronoNanoseconds(timeout));
    start([&result](beast::error_code ec, std::size_t) { result = ec; });
    io_.restart();
    io_.run();
    return result;
  }

  net::io_context& io() { return io_; }
  beast::tcp_stream& stream() { return stream_; }
  beast::flat_buffer& buffer() { return buffer_; }
  const HttpServerOptions& options() const { return options_; }

 private:
  void ServeRequests();
  void Linger();
  // Answers with an error in the protocol's shape (plain text without one).
  void SendError(Request& request, const Protocol* protocol, unsigned http_status,
                 const absl::Status& status, bool close);
  // Answers a CORS preflight (access_policy.h); false when the connection
  // must close.
  bool AnswerPreflight(Request& request, const Router::Match& match);

  net::io_context& io_;  // not owned; this connection's alone
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  const HttpServerOptions& options_;
  const Router& router_;
  const AccessPolicy& access_;
  const Authenticate& authenticate_;
};

}  // namespace warden::http
