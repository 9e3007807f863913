#include "fronts/http/exchange.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "boost/asio/post.hpp"
#include "boost/beast/core/buffers_to_string.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/http/chunk_encode.hpp"
#include "boost/beast/http/empty_body.hpp"
#include "boost/beast/http/write.hpp"
#include "boost/beast/websocket.hpp"
#include "fronts/http/connection.h"

namespace warden::http {

namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;

namespace {

absl::Status WriteFailed(const beast::error_code& ec) {
  return absl::UnavailableError(absl::StrCat("the client is gone: ", ec.message()));
}

}  // namespace

// --- ResponseStream

ResponseStream::~ResponseStream() { (void)Finish(); }

absl::Status ResponseStream::Write(absl::string_view data) {
  if (failed_) return absl::UnavailableError("the client is gone");
  if (finished_) return absl::FailedPreconditionError("the response has ended");
  if (data.empty()) return absl::OkStatus();  // an empty chunk would end the body
  const auto buffer = net::buffer(data.data(), data.size());
  beast::error_code ec = connection_.Await(connection_.options().io_timeout, [&](auto done) {
    if (chunked_) {
      net::async_write(connection_.stream(), bhttp::make_chunk(buffer), std::move(done));
    } else {
      net::async_write(connection_.stream(), buffer, std::move(done));
    }
  });
  if (ec) {
    failed_ = true;
    return WriteFailed(ec);
  }
  return absl::OkStatus();
}

void ResponseStream::Abort() {
  if (finished_ || failed_) return;
  failed_ = true;
  beast::error_code ec;
  connection_.stream().socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
}

absl::Status ResponseStream::Finish() {
  if (finished_ || failed_) return absl::OkStatus();
  finished_ = true;
  if (!chunked_) return absl::OkStatus();  // the connection's close ends it
  beast::error_code ec = connection_.Await(connection_.options().io_timeout, [&](auto done) {
    net::async_write(connection_.stream(), bhttp::make_chunk_last(), std::move(done));
  });
  if (ec) {
    failed_ = true;
    return WriteFailed(ec);
  }
  return absl::OkStatus();
}

std::string SseEvent(absl::string_view data, absl::string_view event) {
  std::string out;
  if (!event.empty()) absl::StrAppend(&out, "event: ", event, "\n");
  for (absl::string_view line : absl::StrSplit(data, '\n')) absl::StrAppend(&out, "data: ", line, "\n");
  out += "\n";
  return out;
}

// --- WebSocket

struct WebSocket::Impl {
  Impl(net::io_context& io, beast::tcp_stream stream) : io(io), ws(std::move(stream)) {}
  net::io_context& io;  // the connection's; run only by Run()
  websocket::stream<beast::tcp_stream> ws;
  beast::flat_buffer read_buffer;
  std::deque<Message> outbox;  // touched only on the connection's thread
  bool writing = false;
  bool closing = false;
};

WebSocket::WebSocket(std::unique_ptr<Impl> impl, std::string subprotocol)
    : impl_(std::move(impl)), subprotocol_(std::move(subprotocol)) {}

WebSocket::~WebSocket() {
  absl::MutexLock lock(&mu_);
  open_ = false;
}

absl::Status WebSocket::Run(const std::function<void(Message)>& on_message) {
  Impl& impl = *impl_;
  absl::Status ended = absl::OkStatus();
  std::function<void()> read_next;
  read_next = [&]() {
    impl.ws.async_read(impl.read_buffer, [&](beast::error_code ec, std::size_t) {
      if (ec) {
        if (ec != websocket::error::closed) ended = absl::UnavailableError(ec.message());
        impl.ws.next_layer().socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
        // The socket is done with; do not wait for the ping timer to expire.
        impl.io.stop();
        return;
      }
      Message message{beast::buffers_to_string(impl.read_buffer.data()), impl.ws.got_binary()};
      impl.read_buffer.consume(impl.read_buffer.size());
      on_message(std::move(message));
      read_next();
    });
  };
  read_next();
  impl.io.restart();
  impl.io.run();
  absl::MutexLock lock(&mu_);
  open_ = false;  // nothing runs the io_context any more: refuse further sends
  // The stream is registered with the connection's io_context, which ends
  // with the connection; whoever still holds this WebSocket (a kernel's
  // close callback) may drop it later, on another thread. Destroy the
  // stream now, while its io_context exists.
  impl_.reset();
  return ended;
}

absl::Status WebSocket::Send(Message message) {
  absl::MutexLock lock(&mu_);
  if (!open_) return absl::FailedPreconditionError("the WebSocket is closed");
  net::post(impl_->io, [self = shared_from_this(), message = std::move(message)]() mutable {
    self->impl_->outbox.push_back(std::move(message));
    if (!self->impl_->writing) self->WriteNext();
  });
  return absl::OkStatus();
}

void WebSocket::WriteNext() {
  Impl& impl = *impl_;
  if (impl.outbox.empty() || impl.closing) {
    impl.writing = false;
    return;
  }
  impl.writing = true;
  impl.ws.text(!impl.outbox.front().binary);
  impl.ws.async_write(net::buffer(impl.outbox.front().data),
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        Impl& impl = *self->impl_;
                        impl.outbox.pop_front();
                        if (ec) {
                          impl.outbox.clear();
                          impl.writing = false;
                          return;
                        }
                        self->WriteNext();
                      });
}

void WebSocket::Close() {
  absl::MutexLock lock(&mu_);
  if (!open_) return;
  net::post(impl_->io, [self = shared_from_this()] {
    Impl& impl = *self->impl_;
    if (impl.closing) return;
    impl.closing = true;
    impl.ws.async_close(websocket::close_code::normal, [](beast::error_code) {});
  });
}

// --- Exchange

absl::Status Exchange::Send(const Response& response) {
  if (answered_) return absl::FailedPreconditionError("this request was answered already");
  answered_ = true;
  // Always 1.1 in the status line, our version (RFC 9110 6.2), whatever the client's.
  bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(response.status), 11};
  res.set(bhttp::field::server, "wardend");
  res.set(bhttp::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) res.insert(name, value);
  for (const auto& [name, value] : headers_) res.insert(name, value);
  res.body() = response.body;
  res.keep_alive(request_.raw.keep_alive() && !close_after_ && !response.close);
  res.prepare_payload();
  close_after_ = !res.keep_alive();
  const bool head = request_.raw.method() == bhttp::verb::head;
  bhttp::response_serializer<bhttp::string_body> serializer(res);
  beast::error_code ec = connection_.Await(connection_.options().io_timeout, [&](auto done) {
    if (head) {
      bhttp::async_write_header(connection_.stream(), serializer, std::move(done));
    } else {
      bhttp::async_write(connection_.stream(), serializer, std::move(done));
    }
  });
  if (ec) {
    close_after_ = true;
    return WriteFailed(ec);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ResponseStream>> Exchange::StartStream(
    unsigned status, absl::string_view content_type,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  if (answered_) return absl::FailedPreconditionError("this request was answered already");
  answered_ = true;
  const bool chunked = request_.raw.version() >= 11;
  bhttp::response<bhttp::empty_body> res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::server, "wardend");
  res.set(bhttp::field::content_type, std::string(content_type));
  res.set(bhttp::field::cache_control, "no-cache");
  res.set("X-Accel-Buffering", "no");  // proxies (nginx) must not hold the stream back
  for (const auto& [name, value] : headers) res.insert(name, value);
  for (const auto& [name, value] : headers_) res.insert(name, value);
  if (chunked) {
    res.chunked(true);
    res.keep_alive(request_.raw.keep_alive());
  } else {
    res.keep_alive(false);  // HTTP/1.0: the body ends when the connection does
  }
  close_after_ = !res.keep_alive();
  bhttp::response_serializer<bhttp::empty_body> serializer(res);
  beast::error_code ec = connection_.Await(connection_.options().io_timeout, [&](auto done) {
    bhttp::async_write_header(connection_.stream(), serializer, std::move(done));
  });
  if (ec) {
    close_after_ = true;
    return WriteFailed(ec);
  }
  return std::unique_ptr<ResponseStream>(new ResponseStream(connection_, chunked));
}

bool Exchange::IsWebSocketUpgrade() const { return websocket::is_upgrade(request_.raw); }

absl::StatusOr<std::shared_ptr<WebSocket>> Exchange::AcceptWebSocket(
    const std::vector<std::string>& subprotocols) {
  if (answered_) return absl::FailedPreconditionError("this request was answered already");
  if (!IsWebSocketUpgrade()) {
    return absl::InvalidArgumentError("this endpoint is a WebSocket: connect with an Upgrade: websocket request");
  }
  std::string chosen;
  const std::string offered_field = request_.Header("Sec-WebSocket-Protocol");
  std::vector<std::string> offered;
  for (absl::string_view p : absl::StrSplit(offered_field, ',', absl::SkipWhitespace())) {
    offered.emplace_back(absl::StripAsciiWhitespace(p));
  }
  for (const std::string& mine : subprotocols) {
    if (std::find(offered.begin(), offered.end(), mine) != offered.end()) {
      chosen = mine;
      break;
    }
  }
  if (chosen.empty() && !offered.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("none of the offered WebSocket subprotocols (", offered_field,
                                                   ") is spoken here; offer one of: ",
                                                   absl::StrJoin(subprotocols, ", "), ", or none"));
  }
  answered_ = true;
  upgraded_ = true;
  close_after_ = true;
  auto impl = std::make_unique<WebSocket::Impl>(connection_.io(), std::move(connection_.stream()));
  // No deadline on the socket itself: an idle kernel channel is normal. The
  // WebSocket pings instead, and drops a peer that stops answering.
  beast::get_lowest_layer(impl->ws).expires_never();
  websocket::stream_base::timeout timeouts = websocket::stream_base::timeout::suggested(beast::role_type::server);
  timeouts.idle_timeout = std::chrono::seconds(120);
  timeouts.keep_alive_pings = true;
  impl->ws.set_option(timeouts);
  impl->ws.set_option(websocket::stream_base::decorator([chosen](websocket::response_type& res) {
    res.set(bhttp::field::server, "wardend");
    if (!chosen.empty()) res.set(bhttp::field::sec_websocket_protocol, chosen);
  }));
  impl->ws.read_message_max(connection_.options().max_body_bytes);
  beast::error_code ec = net::error::operation_aborted;
  bool accepted = false;
  impl->ws.async_accept(request_.raw, [&](beast::error_code e) {
    ec = e;
    accepted = true;
  });
  // Only until the handshake is done: the WebSocket's ping timer, armed by
  // now, would otherwise keep run() going until it fires.
  connection_.io().restart();
  while (!accepted && connection_.io().run_one() > 0) {
  }
  if (ec) return absl::UnavailableError(absl::StrCat("WebSocket handshake failed: ", ec.message()));
  return std::shared_ptr<WebSocket>(new WebSocket(std::move(impl), chosen));
}

}  // namespace warden::http
