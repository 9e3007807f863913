#include "fronts/http/exchange.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "boost/asio/write.hpp"
#include "boost/beast/http/chunk_encode.hpp"
#include "boost/beast/http/empty_body.hpp"
#include "boost/beast/http/write.hpp"
#include "boost/beast/websocket/rfc6455.hpp"
#include "fronts/http/connection.h"

namespace warden::http {

namespace bhttp = boost::beast::http;

namespace {

absl::Status WriteFailed(const beast::error_code& ec) {
  return absl::UnavailableError(absl::StrCat("the client is gone: ", ec.message()));
}

// A write of `bytes` (kept alive by the caller's shared_ptr) as one chunk,
// or raw.
StartOp WriteBytes(std::shared_ptr<const std::string> bytes, bool chunk) {
  return [bytes, chunk](beast::tcp_stream& stream, Done done) {
    auto written = [done = std::move(done)](beast::error_code ec, std::size_t) { done(ec); };
    const auto buffer = net::buffer(bytes->data(), bytes->size());
    if (chunk) {
      net::async_write(stream, bhttp::make_chunk(buffer), std::move(written));
    } else {
      net::async_write(stream, buffer, std::move(written));
    }
  };
}

}  // namespace

// --- Hangup

Hangup::Subscription& Hangup::Subscription::operator=(Subscription&& other) noexcept {
  if (this != &other) {
    Subscription gone = std::move(*this);  // unsubscribes
    hangup_ = std::move(other.hangup_);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

Hangup::Subscription::~Subscription() {
  if (!hangup_ || id_ == 0) return;
  absl::MutexLock lock(&hangup_->mu_);  // waits for a call under way
  auto& calls = hangup_->calls_;
  calls.erase(std::remove_if(calls.begin(), calls.end(), [this](const auto& c) { return c.first == id_; }),
              calls.end());
}

Hangup::Subscription Hangup::Subscribe(const std::shared_ptr<Hangup>& hangup, absl::AnyInvocable<void()> on_hangup) {
  absl::MutexLock lock(&hangup->mu_);
  if (hangup->gone_) {
    on_hangup();
    return Subscription();
  }
  const int id = hangup->next_id_++;
  hangup->calls_.emplace_back(id, std::move(on_hangup));
  return Subscription(hangup, id);
}

bool Hangup::gone() const {
  absl::MutexLock lock(&mu_);
  return gone_;
}

bool Hangup::Fire() {
  absl::MutexLock lock(&mu_);
  if (ended_ || gone_) return false;
  gone_ = true;
  for (auto& [id, call] : calls_) call();
  calls_.clear();
  return true;
}

void Hangup::End() {
  absl::MutexLock lock(&mu_);
  ended_ = true;
  calls_.clear();
}

// --- ResponseStream

ResponseStream::~ResponseStream() {
  (void)Finish();
  hangup_->End();
}

absl::Status ResponseStream::Write(absl::string_view data) {
  if (failed_) return absl::UnavailableError("the client is gone");
  if (finished_) return absl::FailedPreconditionError("the response has ended");
  if (data.empty()) return absl::OkStatus();  // an empty chunk would end the body
  auto bytes = std::make_shared<const std::string>(data);
  beast::error_code ec = connection_.RunAndWait(WriteBytes(bytes, chunked_), bytes);
  if (ec) {
    failed_ = true;
    return WriteFailed(ec);
  }
  return absl::OkStatus();
}

void ResponseStream::Abort() {
  if (finished_ || failed_) return;
  failed_ = true;
  connection_.Close();  // on the strand: the socket shuts down, nothing more is written
}

absl::Status ResponseStream::Finish() {
  if (finished_ || failed_) {
    lease_.reset();
    return absl::OkStatus();
  }
  finished_ = true;
  lease_.reset();
  if (!chunked_) return absl::OkStatus();  // the connection's close ends it
  beast::error_code ec = connection_.RunAndWait(
      [](beast::tcp_stream& stream, Done done) {
        net::async_write(stream, bhttp::make_chunk_last(),
                         [done = std::move(done)](beast::error_code ec, std::size_t) { done(ec); });
      },
      nullptr);
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

// --- Exchange

absl::Status Exchange::Send(Response&& response) {
  if (answered_) return absl::FailedPreconditionError("this request was answered already");
  answered_ = true;
  close_after_ = !request_.raw.keep_alive() || response.close;
  answer_ = std::move(response);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ResponseStream>> Exchange::StartStream(
    unsigned status, absl::string_view content_type,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  if (answered_) return absl::FailedPreconditionError("this request was answered already");
  if (on_io_thread_) return absl::FailedPreconditionError("a nonblocking route cannot stream");
  absl::StatusOr<std::unique_ptr<TenantStreams::Lease>> lease =
      connection_.shared().streams->Open(request_.tenant, /*holds_thread=*/true);
  if (!lease.ok()) return lease.status();
  answered_ = true;
  const bool chunked = request_.raw.version() >= 11;
  struct Job {
    explicit Job(bhttp::response<bhttp::empty_body> m) : message(std::move(m)), serializer(message) {}
    bhttp::response<bhttp::empty_body> message;
    bhttp::response_serializer<bhttp::empty_body> serializer;
  };
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
  auto job = std::make_shared<Job>(std::move(res));
  beast::error_code ec = connection_.RunAndWait(
      [job](beast::tcp_stream& stream, Done done) {
        bhttp::async_write_header(stream, job->serializer,
                                  [done = std::move(done)](beast::error_code ec, std::size_t) { done(ec); });
      },
      job);
  if (ec) {
    close_after_ = true;
    return WriteFailed(ec);
  }
  auto hangup = std::make_shared<Hangup>();
  connection_.WatchForHangup(hangup);
  return std::unique_ptr<ResponseStream>(new ResponseStream(connection_, chunked, *std::move(lease), hangup));
}

bool Exchange::IsWebSocketUpgrade() const { return boost::beast::websocket::is_upgrade(request_.raw); }

absl::Status Exchange::TakeConnection(Taker take) {
  if (answered_) return absl::FailedPreconditionError("this request was answered already");
  if (on_io_thread_) return absl::FailedPreconditionError("a nonblocking route cannot hand its connection over");
  absl::StatusOr<std::unique_ptr<TenantStreams::Lease>> lease = connection_.shared().streams->Open(request_.tenant);
  if (!lease.ok()) return lease.status();
  answered_ = true;
  upgraded_ = true;
  close_after_ = true;
  beast::error_code ec = connection_.HandOverRaw(
      [connection = connection_.shared_from_this(), lease = std::shared_ptr<TenantStreams::Lease>(*std::move(lease)),
       take = std::move(take)](beast::tcp_stream stream, std::string leftover) mutable {
        // The connection and the tenant's lease live as long as the taker keeps them.
        auto keep = std::make_shared<std::pair<std::shared_ptr<Connection>, std::shared_ptr<TenantStreams::Lease>>>(
            connection, lease);
        return std::move(take)(std::move(stream), std::move(leftover), std::move(keep));
      });
  if (ec) return absl::UnavailableError(absl::StrCat("the client is gone: ", ec.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<WebSocket>> Exchange::AcceptWebSocket(
    const std::vector<std::string>& subprotocols) {
  if (answered_) return absl::FailedPreconditionError("this request was answered already");
  if (!IsWebSocketUpgrade()) {
    return absl::InvalidArgumentError("this endpoint is a WebSocket: connect with an Upgrade: websocket request");
  }
  if (on_io_thread_) return absl::FailedPreconditionError("a nonblocking route cannot upgrade");
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
  absl::StatusOr<std::unique_ptr<TenantStreams::Lease>> lease = connection_.shared().streams->Open(request_.tenant);
  if (!lease.ok()) return lease.status();
  answered_ = true;
  upgraded_ = true;
  close_after_ = true;
  auto request = std::make_shared<const RawRequest>(request_.raw);
  auto socket = std::make_shared<std::shared_ptr<WebSocket>>();
  beast::error_code ec = connection_.HandOver(
      [connection = connection_.shared_from_this(), lease = *std::move(lease), request, chosen, socket,
       max = connection_.options().max_body_bytes](beast::tcp_stream stream, Done done) mutable {
        *socket = WebSocket::Accept(std::move(connection), std::move(lease), std::move(stream), request, chosen, max,
                                    std::move(done));
      });
  if (ec) return absl::UnavailableError(absl::StrCat("WebSocket handshake failed: ", ec.message()));
  connection_.SetWebSocket(*socket);
  return *socket;
}

}  // namespace warden::http
