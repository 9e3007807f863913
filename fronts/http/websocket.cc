#include "fronts/http/websocket.h"

#include <deque>
#include <optional>
#include <utility>

#include "absl/synchronization/notification.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "boost/beast/core/buffers_to_string.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/field.hpp"
#include "boost/beast/websocket.hpp"
#include "fronts/http/connection.h"

namespace warden::http {

namespace websocket = boost::beast::websocket;
namespace bhttp = boost::beast::http;

struct WebSocket::Impl {
  Impl(std::shared_ptr<Connection> c, std::unique_ptr<TenantStreams::Lease> l, beast::tcp_stream stream)
      : connection(std::move(c)), lease(std::move(l)), executor(stream.get_executor()),
        ws(std::make_unique<websocket::stream<beast::tcp_stream>>(std::move(stream))) {}
  // First, so released last: the connection counts until the socket is
  // gone, and keeps the server's io_context (which the strand and the
  // stream belong to) alive until then.
  std::shared_ptr<Connection> connection;
  std::unique_ptr<TenantStreams::Lease> lease;
  // The connection's strand; null once done. Read under the WebSocket's mu_
  // while it is open, reset on the strand (under mu_) once it is done.
  std::optional<net::any_io_executor> executor;
  // Everything below is touched on the strand only.
  std::unique_ptr<websocket::stream<beast::tcp_stream>> ws;  // null once done
  beast::flat_buffer read_buffer;
  std::deque<Message> outbox;
  size_t outbox_bytes = 0;
  bool writing = false;
  bool closing = false;
  bool started = false;
  bool ended = false;
  std::function<void(Message)> on_message;
  std::function<void(absl::Status)> on_close;
};

WebSocket::WebSocket(std::unique_ptr<Impl> impl, std::string subprotocol)
    : impl_(std::move(impl)), subprotocol_(std::move(subprotocol)) {}

WebSocket::~WebSocket() = default;

std::shared_ptr<WebSocket> WebSocket::Accept(std::shared_ptr<Connection> connection,
                                             std::unique_ptr<TenantStreams::Lease> lease, beast::tcp_stream stream,
                                             std::shared_ptr<const RawRequest> request, std::string subprotocol,
                                             size_t max_message_bytes, std::function<void(beast::error_code)> done) {
  auto impl = std::make_unique<Impl>(std::move(connection), std::move(lease), std::move(stream));
  websocket::stream<beast::tcp_stream>& ws = *impl->ws;
  // No deadline on the socket itself: an idle kernel channel is normal. The
  // WebSocket pings instead, and drops a peer that stops answering.
  beast::get_lowest_layer(ws).expires_never();
  websocket::stream_base::timeout timeouts = websocket::stream_base::timeout::suggested(beast::role_type::server);
  timeouts.idle_timeout = std::chrono::seconds(120);
  timeouts.keep_alive_pings = true;
  ws.set_option(timeouts);
  ws.set_option(websocket::stream_base::decorator([subprotocol](websocket::response_type& res) {
    res.set(bhttp::field::server, "wardend");
    if (!subprotocol.empty()) res.set(bhttp::field::sec_websocket_protocol, subprotocol);
  }));
  ws.read_message_max(max_message_bytes);
  auto socket = std::shared_ptr<WebSocket>(new WebSocket(std::move(impl), subprotocol));
  ws.async_accept(*request, [socket, request, done = std::move(done)](beast::error_code ec) {
    if (ec) socket->End(absl::UnavailableError(ec.message()));
    done(ec);
  });
  return socket;
}

template <class F>
bool WebSocket::Post(F&& f) {
  absl::MutexLock lock(&mu_);
  if (!open_) return false;
  net::post(*impl_->executor, std::forward<F>(f));
  return true;
}

void WebSocket::Start(std::function<void(Message)> on_message, std::function<void(absl::Status)> on_close) {
  auto closed_before = [](std::function<void(absl::Status)>& on_close) {
    if (on_close) std::exchange(on_close, nullptr)(absl::UnavailableError("the WebSocket closed before it was served"));
  };
  // Both callbacks are shared with the strand's task, which may never run
  // (the socket ends first): then they are still here to say so.
  auto callbacks = std::make_shared<std::pair<std::function<void(Message)>, std::function<void(absl::Status)>>>(
      std::move(on_message), std::move(on_close));
  const bool posted = Post([self = shared_from_this(), callbacks, closed_before] {
    Impl& impl = *self->impl_;
    impl.on_message = std::move(callbacks->first);
    impl.on_close = std::move(callbacks->second);
    if (impl.ended || impl.started) {
      // Closed before it was started (the server stopping): say so once.
      if (impl.ended && !impl.started) closed_before(impl.on_close);
      impl.started = true;
      return;
    }
    impl.started = true;
    self->ReadNext();
  });
  if (!posted) closed_before(callbacks->second);
}

absl::Status WebSocket::Run(const std::function<void(Message)>& on_message) {
  absl::Notification done;
  absl::Status ended;
  Start(on_message, [&done, &ended](absl::Status why) {
    ended = std::move(why);
    done.Notify();
  });
  done.WaitForNotification();
  return ended;
}

void WebSocket::ReadNext() {
  Impl& impl = *impl_;
  impl.ws->async_read(impl.read_buffer, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    Impl& impl = *self->impl_;
    if (impl.ended) return;
    if (ec) {
      self->End(ec == websocket::error::closed ? absl::OkStatus() : absl::UnavailableError(ec.message()));
      return;
    }
    Message message{beast::buffers_to_string(impl.read_buffer.data()), impl.ws->got_binary()};
    impl.read_buffer.consume(impl.read_buffer.size());
    if (impl.on_message) impl.on_message(std::move(message));
    if (!impl.ended) self->ReadNext();
  });
}

absl::Status WebSocket::Send(Message message) {
  const bool posted = Post([self = shared_from_this(), message = std::move(message)]() mutable {
    Impl& impl = *self->impl_;
    if (impl.ended) return;
    impl.outbox_bytes += message.data.size();
    impl.outbox.push_back(std::move(message));
    if (impl.outbox_bytes > kMaxQueuedBytes) {
      // The peer reads nothing: holding more for it would take memory from
      // every other client.
      self->End(absl::ResourceExhaustedError("the WebSocket peer stopped reading"));
      return;
    }
    if (!impl.writing) self->WriteNext();
  });
  return posted ? absl::OkStatus() : absl::FailedPreconditionError("the WebSocket is closed");
}

void WebSocket::WriteNext() {
  Impl& impl = *impl_;
  if (impl.ended || impl.outbox.empty() || impl.closing) {
    impl.writing = false;
    return;
  }
  impl.writing = true;
  impl.ws->text(!impl.outbox.front().binary);
  impl.ws->async_write(net::buffer(impl.outbox.front().data),
                       [self = shared_from_this()](beast::error_code ec, std::size_t) {
                         Impl& impl = *self->impl_;
                         if (impl.ended) return;
                         impl.outbox_bytes -= impl.outbox.front().data.size();
                         impl.outbox.pop_front();
                         if (ec) {
                           self->End(absl::UnavailableError(ec.message()));
                           return;
                         }
                         self->WriteNext();
                       });
}

void WebSocket::Close() {
  (void)Post([self = shared_from_this()] {
    Impl& impl = *self->impl_;
    if (impl.ended || impl.closing) return;
    impl.closing = true;
    // The read loop sees the peer's answering close frame and ends the socket.
    impl.ws->async_close(websocket::close_code::normal, [self](beast::error_code ec) {
      if (ec) self->End(absl::UnavailableError(ec.message()));
    });
  });
}

void WebSocket::Abort() {
  (void)Post([self = shared_from_this()] { self->End(absl::UnavailableError("the server closed the WebSocket")); });
}

void WebSocket::End(absl::Status why) {
  Impl& impl = *impl_;
  if (impl.ended) return;
  impl.ended = true;
  {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }
  beast::error_code ignored;
  beast::get_lowest_layer(*impl.ws).socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  beast::get_lowest_layer(*impl.ws).close();  // pending operations complete with operation_aborted
  impl.outbox.clear();
  impl.outbox_bytes = 0;
  if (impl.started && impl.on_close) {
    auto on_close = std::move(impl.on_close);
    on_close(std::move(why));
  }
  impl.on_message = nullptr;
  // Last, after everything queued before open_ went false: free the stream
  // (the aborted operations keep what they use), the strand and the
  // connection. Whoever still holds this WebSocket holds only a husk, safe
  // to call and to drop anywhere, after the server too.
  net::post(*impl.executor, [self = shared_from_this()] {
    Impl& impl = *self->impl_;
    impl.ws.reset();
    impl.read_buffer = beast::flat_buffer();
    impl.lease.reset();
    {
      absl::MutexLock lock(&self->mu_);
      impl.executor.reset();
    }
    impl.connection.reset();
  });
}

}  // namespace warden::http
