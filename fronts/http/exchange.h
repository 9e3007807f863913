// Exchange: how a handler answers one request. Exactly one of Send,
// StartStream or AcceptWebSocket, once; none throws.
//
//   Send            hands the whole answer to the server, which writes it
//                   once the handler has returned (so a handler's thread
//                   goes back to the pool at once; Send's status says only
//                   whether the request was answered already).
//   ResponseStream  a chunked response written piece by piece: server-sent
//                   events (SseEvent), NDJSON lines, anything streamed.
//                   StartStream and each Write block the handler until the
//                   bytes are out or the write times out. One of its
//                   tenant's long-lived streams while open.
//   WebSocket       the connection upgraded (websocket.h), with the
//                   subprotocol chosen from the client's offer.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "fronts/http/request.h"
#include "fronts/http/tenant_streams.h"
#include "fronts/http/websocket.h"

namespace warden::http {

class Connection;  // fronts/http/connection.h; one per client connection

// Hangup: the client of a streamed response went away - closed or reset
// its connection. The connection notices when it happens (it keeps a read
// pending on the socket while the stream lasts), not at the stream's next
// write, which may be a keepalive a minute away: a handler waiting on its
// upstream subscribes and is woken, so its thread and its stream are freed
// at once. A client that sends more bytes during the stream (a pipelined
// request) is no longer watched; its departure shows at the next write.
class Hangup {
 public:
  class Subscription {
   public:
    Subscription() = default;
    Subscription(Subscription&& other) noexcept
        : hangup_(std::move(other.hangup_)), id_(std::exchange(other.id_, 0)) {}
    Subscription& operator=(Subscription&& other) noexcept;
    ~Subscription();  // no call after it returns

   private:
    friend class Hangup;
    Subscription(std::shared_ptr<Hangup> hangup, int id) : hangup_(std::move(hangup)), id_(id) {}
    std::shared_ptr<Hangup> hangup_;
    int id_ = 0;
  };

  // Calls `on_hangup` once, when the client goes (now, on this thread, if
  // it has gone already); never after the Subscription is destroyed. It
  // runs on the connection's I/O thread under the Hangup's lock: it must be
  // quick and must not subscribe (cancelling a gRPC call is both).
  [[nodiscard]] static Subscription Subscribe(const std::shared_ptr<Hangup>& hangup,
                                              absl::AnyInvocable<void()> on_hangup);
  bool gone() const;
  // For the connection: the client went away. Returns false when the
  // stream had ended already (nothing to do).
  bool Fire();
  // For the stream: it ended; a later hangup is the connection's own.
  void End();

 private:
  mutable absl::Mutex mu_;
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::pair<int, absl::AnyInvocable<void()>>> calls_ ABSL_GUARDED_BY(mu_);
};

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
  // The client's departure while the stream lasts (Hangup::Subscribe).
  const std::shared_ptr<Hangup>& hangup() const { return hangup_; }

 private:
  friend class Exchange;
  ResponseStream(Connection& connection, bool chunked, std::unique_ptr<TenantStreams::Lease> lease,
                 std::shared_ptr<Hangup> hangup)
      : connection_(connection), chunked_(chunked), lease_(std::move(lease)), hangup_(std::move(hangup)) {}
  Connection& connection_;
  const bool chunked_;  // false for HTTP/1.0 clients: raw bytes, then close
  std::unique_ptr<TenantStreams::Lease> lease_;
  const std::shared_ptr<Hangup> hangup_;
  bool finished_ = false;
  bool failed_ = false;
};

// One server-sent event ("event: NAME\n" if named, "data: ...\n" per line, "\n").
std::string SseEvent(absl::string_view data, absl::string_view event = "");

class Exchange {
 public:
  // `headers` go with every answer (the server's CORS headers). An
  // exchange `on_io_thread` (a nonblocking route's) cannot stream or
  // upgrade.
  Exchange(Connection& connection, const Request& request,
           std::vector<std::pair<std::string, std::string>> headers = {}, bool on_io_thread = false)
      : connection_(connection), request_(request), headers_(std::move(headers)), on_io_thread_(on_io_thread) {}

  absl::Status Send(const Response& response) { return Send(Response(response)); }
  absl::Status Send(Response&& response);
  // RESOURCE_EXHAUSTED (before anything is sent) when the caller's tenant
  // holds as many long-lived streams as the server allows; UNAVAILABLE when
  // streams hold half of the handler threads already (TenantStreams).
  absl::StatusOr<std::unique_ptr<ResponseStream>> StartStream(
      unsigned status, absl::string_view content_type,
      const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Completes the WebSocket handshake. `subprotocols` are the ones the
  // handler speaks, best first; the first the client offered is chosen, or
  // none when the client offered none (InvalidArgument if it offered only
  // others, or if this is no upgrade request; RESOURCE_EXHAUSTED like
  // StartStream). Then Start the socket and return: it needs no thread.
  absl::StatusOr<std::shared_ptr<WebSocket>> AcceptWebSocket(const std::vector<std::string>& subprotocols);

  // A raw route's (RouteOptions::raw) whole connection, its request head
  // read and nothing after it: `take` gets, on the connection's strand, the
  // stream, the bytes the server read past the head, and `keep`, the
  // connection (one of the server's until `keep` is dropped); it returns
  // how to end what it does with them when the server stops. Counts as one
  // of the tenant's long-lived streams while `keep` lives.
  using Taker = absl::AnyInvocable<std::function<void()>(boost::beast::tcp_stream stream, std::string leftover,
                                                         std::shared_ptr<void> keep) &&>;
  absl::Status TakeConnection(Taker take);

  bool IsWebSocketUpgrade() const;
  bool answered() const { return answered_; }
  bool upgraded() const { return upgraded_; }
  // Whether the connection must close after this exchange.
  bool close_after() const { return close_after_; }
  // What Send was given, for the server to write; once.
  std::optional<Response> TakeAnswer() { return std::exchange(answer_, std::nullopt); }

 private:
  Connection& connection_;
  const Request& request_;
  const std::vector<std::pair<std::string, std::string>> headers_;
  const bool on_io_thread_;
  std::optional<Response> answer_;
  bool answered_ = false;
  bool upgraded_ = false;
  bool close_after_ = false;
};

}  // namespace warden::http
