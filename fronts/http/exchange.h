// Exchange: how a handler answers one request. Exactly one of Send,
// StartStream or AcceptWebSocket, once. All of them block the calling
// handler (the connection's own thread) until the bytes are out or the
// write times out; none throws.
//
//   ResponseStream  a chunked response written piece by piece: server-sent
//                   events (SseEvent), NDJSON lines, anything streamed.
//   WebSocket       the connection upgraded (RFC 6455), with the
//                   subprotocol chosen from the client's offer.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "fronts/http/request.h"

namespace warden::http {

class Connection;  // fronts/http/connection.h; one per client connection

class ResponseStream {
 public:
  ~ResponseStream();  // Finish()
  // Sends `data` as one chunk, now. Fails when the client has gone away or
  // stopped reading; the handler should then stop producing.
  absl::Status Write(absl::string_view data);
  // Ends the body (the last chunk). Idempotent.
  absl::Status Finish();
  // Drops the connection without ending the body, as a server that went
  // away mid-response would: the client's read fails (E2B's SDKs take that,
  // with the sandbox gone, for "killed during the request").
  void Abort();

 private:
  friend class Exchange;
  ResponseStream(Connection& connection, bool chunked) : connection_(connection), chunked_(chunked) {}
  Connection& connection_;
  const bool chunked_;  // false for HTTP/1.0 clients: raw bytes, then close
  bool finished_ = false;
  bool failed_ = false;
};

// One server-sent event ("event: NAME\n" if named, "data: ...\n" per line, "\n").
std::string SseEvent(absl::string_view data, absl::string_view event = "");

class WebSocket : public std::enable_shared_from_this<WebSocket> {
 public:
  struct Message {
    std::string data;
    bool binary = false;
  };
  ~WebSocket();

  const std::string& subprotocol() const { return subprotocol_; }

  // Serves the socket on the calling thread (the handler's) until the peer
  // closes, the connection fails, the server stops, or Close() is called:
  // `on_message` sees each message in order, on this thread, and should not
  // block for long (reads and queued sends wait meanwhile).
  absl::Status Run(const std::function<void(Message)>& on_message);
  // Queues a message; any thread, before or during Run. FailedPrecondition
  // once the socket has closed.
  absl::Status Send(Message message);
  // Starts a normal close (1000); any thread.
  void Close();

 private:
  friend class Exchange;
  struct Impl;
  explicit WebSocket(std::unique_ptr<Impl> impl, std::string subprotocol);
  void WriteNext();  // on the connection's thread

  std::unique_ptr<Impl> impl_;
  const std::string subprotocol_;
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
};

class Exchange {
 public:
  // `headers` go with every answer (the server's CORS headers).
  Exchange(Connection& connection, const Request& request,
           std::vector<std::pair<std::string, std::string>> headers = {})
      : connection_(connection), request_(request), headers_(std::move(headers)) {}

  absl::Status Send(const Response& response);
  absl::StatusOr<std::unique_ptr<ResponseStream>> StartStream(
      unsigned status, absl::string_view content_type,
      const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Completes the WebSocket handshake. `subprotocols` are the ones the
  // handler speaks, best first; the first the client offered is chosen, or
  // none when the client offered none (InvalidArgument if it offered only
  // others, or if this is no upgrade request).
  absl::StatusOr<std::shared_ptr<WebSocket>> AcceptWebSocket(const std::vector<std::string>& subprotocols);

  bool IsWebSocketUpgrade() const;
  bool answered() const { return answered_; }
  bool upgraded() const { return upgraded_; }
  // Whether the connection must close after this exchange.
  bool close_after() const { return close_after_; }

 private:
  Connection& connection_;
  const Request& request_;
  const std::vector<std::pair<std::string, std::string>> headers_;
  bool answered_ = false;
  bool upgraded_ = false;
  bool close_after_ = false;
};

}  // namespace warden::http
