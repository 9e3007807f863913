// WebSocket: a connection the HTTP server upgraded (RFC 6455) for a
// handler (Exchange::AcceptWebSocket), with the subprotocol chosen from the
// client's offer. Once started it is served by the server's I/O threads and
// holds no thread of its own, so a thousand idle sockets cost only their
// memory. It counts as one of its tenant's long-lived streams, and as one
// of the server's connections, until it closes.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "boost/beast/core/tcp_stream.hpp"
#include "fronts/http/request.h"
#include "fronts/http/tenant_streams.h"

namespace warden::http {

class Connection;

class WebSocket : public std::enable_shared_from_this<WebSocket> {
 public:
  struct Message {
    std::string data;
    bool binary = false;
  };
  ~WebSocket();

  const std::string& subprotocol() const { return subprotocol_; }

  // Starts serving the socket and returns at once. `on_message` sees each
  // message in order, and `on_close` (if set) once when the socket is done
  // (the peer closed, the connection failed, Close() or Abort(), the server
  // stopped): OK for a normal close, else why. Both run on the socket's I/O
  // strand, one at a time, and must not block: hand slow work to a thread
  // pool. A socket already done when Start is called says so through
  // `on_close` at once, on the calling thread. Call once.
  void Start(std::function<void(Message)> on_message, std::function<void(absl::Status)> on_close = nullptr);
  // Start, then wait until the socket is done; holds the calling thread for
  // the socket's whole life, so only for short-lived sockets and tests.
  absl::Status Run(const std::function<void(Message)>& on_message);
  // Queues a message; any thread, before or after Start. FailedPrecondition
  // once the socket is done. A peer that lets more than
  // kMaxQueuedBytes pile up unread loses the connection.
  absl::Status Send(Message message);
  static constexpr size_t kMaxQueuedBytes = 64 << 20;
  // Starts a normal close (1000); any thread. Nothing once the socket is done.
  void Close();
  // Drops the TCP connection now (the server stops); any thread.
  void Abort();

  // Whoever holds a WebSocket (a kernel's channel, a close callback) may
  // keep it past its connection, and past the server, and call it or drop
  // it from any thread: once the socket is done, it holds nothing of the
  // server's (no stream, no strand, no connection), and every call above
  // answers without touching the server's io_context.

 private:
  friend class Exchange;
  struct Impl;
  WebSocket(std::unique_ptr<Impl> impl, std::string subprotocol);
  // On the connection's strand, with the stream it handed over: starts the
  // handshake answering `request`; `done` gets its result. The socket keeps
  // `connection` (counted among the server's) and `lease` until it is done.
  static std::shared_ptr<WebSocket> Accept(std::shared_ptr<Connection> connection,
                                           std::unique_ptr<TenantStreams::Lease> lease,
                                           boost::beast::tcp_stream stream, std::shared_ptr<const RawRequest> request,
                                           std::string subprotocol, size_t max_message_bytes,
                                           std::function<void(boost::beast::error_code)> done);
  // Queues `f` on the strand (never runs it inline) and says true, or says
  // false once the socket is done: then nothing is queued, so everything
  // queued runs before End's last step lets the strand go.
  template <class F>
  bool Post(F&& f);
  void ReadNext();    // on the strand
  void WriteNext();   // on the strand
  void End(absl::Status why);  // on the strand; once

  const std::unique_ptr<Impl> impl_;
  const std::string subprotocol_;
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace warden::http
