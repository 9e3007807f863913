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

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fronts/http/request.h"
#include "fronts/http/tenant_streams.h"
#include "fronts/http/websocket.h"

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
  ResponseStream(Connection& connection, bool chunked, std::unique_ptr<TenantStreams::Lease> lease)
      : connection_(connection), chunked_(chunked), lease_(std::move(lease)) {}
  Connection& connection_;
  const bool chunked_;  // false for HTTP/1.0 clients: raw bytes, then close
  std::unique_ptr<TenantStreams::Lease> lease_;
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
