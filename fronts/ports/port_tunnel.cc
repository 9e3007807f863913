#include "fronts/ports/port_tunnel.h"

#include "absl/strings/str_cat.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"
#include "fronts/http/upstream.h"

namespace warden::ports {

namespace net = boost::asio;
using boost::system::error_code;

absl::StatusOr<std::shared_ptr<PortStream>> PortStream::Open(v1::Executor::StubInterface* executor,
                                                            const Credential& credential, const std::string& session_id,
                                                            int port, absl::Time deadline) {
  std::shared_ptr<PortStream> stream(new PortStream());
  // What the caller holds: dropped before Start (a refusal, a timeout, a
  // client gone before the relay began), it ends the call.
  std::shared_ptr<PortStream> handle(stream.get(), [stream](PortStream* s) { s->Unclaimed(); });
  stream->context_ = http::UpstreamContext(credential.bearer);
  stream->request_.set_session_id(session_id);
  stream->request_.set_port(port);
  stream->request_.set_traffic_token(credential.traffic_token);
  {
    absl::MutexLock lock(&stream->mu_);
    stream->self_ = stream;  // until OnDone
  }
  executor->async()->ConnectPort(stream->context_.get(), stream.get());
  // Both flows go on from outside the reactions (Start, the client's
  // strand): a hold each keeps the call until its flow has ended.
  stream->AddMultipleHolds(2);
  stream->StartWrite(&stream->request_);
  stream->StartRead(&stream->response_);
  stream->StartCall();
  if (!stream->settled_.WaitForNotificationWithDeadline(deadline)) {
    stream->context_->TryCancel();
    return absl::DeadlineExceededError(absl::StrCat("port ", port, " of sandbox ", session_id, " did not answer in time"));
  }
  if (!stream->opened_) return http::FromGrpc(stream->status_);
  return handle;
}

PortStream::~PortStream() = default;

void PortStream::Release(bool read, bool write) {
  {
    absl::MutexLock lock(&mu_);
    read = read && read_held_;
    write = write && write_held_;
    if (read) read_held_ = false;
    if (write) write_held_ = false;
  }
  // Outside the lock: the last release may run OnDone on this thread.
  if (read) RemoveHold();
  if (write) RemoveHold();
}

void PortStream::Unclaimed() {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return;
  }
  context_->TryCancel();
  Release(true, true);
}

std::function<void()> PortStream::Start(boost::beast::tcp_stream client, std::string first, std::shared_ptr<void> keep) {
  client.expires_never();
  {
    absl::MutexLock lock(&mu_);
    client_.emplace(std::move(client));
    keep_ = std::move(keep);
    // The call is still there: the read flow's hold keeps it until Start.
    started_ = true;
    // One write at a time: the opening message's may still be in flight.
    if (!opening_written_) {
      pending_first_ = std::move(first);
    } else if (!first.empty()) {
      WriteUp(std::move(first));
    } else {
      ReadClient();
    }
  }
  StartRead(&response_);  // the port's bytes from now on
  std::weak_ptr<PortStream> weak = shared_from_this();
  return [weak] {
    if (auto self = weak.lock()) self->Abort();
  };
}

void PortStream::WriteUp(std::string data) {
  request_.Clear();
  request_.set_data(std::move(data));
  StartWrite(&request_);
}

void PortStream::ReadClient() {
  auto self = shared_from_this();
  net::dispatch(client_->get_executor(), [self] {
    self->client_->async_read_some(net::buffer(self->buffer_), [self](error_code ec, size_t n) {
      if (ec) {
        // The client is done sending: so is the call (the port still answers).
        self->StartWritesDone();
        self->Release(false, true);
        return;
      }
      absl::MutexLock lock(&self->mu_);
      self->WriteUp(std::string(self->buffer_.data(), n));
    });
  });
}

void PortStream::OnWriteDone(bool ok) {
  if (!ok) return Release(false, true);  // the call ended; OnDone follows
  absl::MutexLock lock(&mu_);
  if (!opening_written_) {
    opening_written_ = true;
    if (!started_) return;  // Start goes on from here
    if (pending_first_ && !pending_first_->empty()) {
      std::string first = std::move(*pending_first_);
      pending_first_.reset();
      return WriteUp(std::move(first));
    }
    pending_first_.reset();
  }
  if (!started_) return;
  ReadClient();
}

void PortStream::OnReadDone(bool ok) {
  if (!opened_ && !settled_.HasBeenNotified()) {
    if (ok && response_.opened()) {
      host_header_ = response_.host_header();
      opened_ = true;
      settled_.Notify();
    }
    // Not opened: the call's status (OnDone) says why, once neither flow
    // holds it (no Start will come). Opened: Start goes on.
    if (!opened_) Release(true, true);
    return;
  }
  if (!ok) {
    // The port closed: the client hears the end after the last bytes.
    {
      auto self = shared_from_this();
      absl::MutexLock lock(&mu_);
      if (client_) {
        net::dispatch(client_->get_executor(), [self] {
          error_code ignored;
          self->client_->socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
        });
      }
    }
    return Release(true, false);
  }
  auto data = std::make_shared<std::string>(std::move(*response_.mutable_data()));
  auto self = shared_from_this();
  absl::MutexLock lock(&mu_);
  net::dispatch(client_->get_executor(), [self, data] {
    net::async_write(*self->client_, net::buffer(*data), [self, data](error_code ec, size_t) {
      if (ec) {
        self->Abort();
        return self->Release(true, false);
      }
      self->StartRead(&self->response_);  // under the read flow's hold
    });
  });
}

void PortStream::OnDone(const grpc::Status& status) {
  if (!settled_.HasBeenNotified()) {
    status_ = status.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the port closed at once") : status;
    settled_.Notify();
  }
  std::shared_ptr<PortStream> self;
  absl::MutexLock lock(&mu_);
  if (client_) {
    auto keep = self_;
    net::post(client_->get_executor(), [keep] {
      // After the last bytes written (they were, before the read that saw the end).
      error_code ignored;
      keep->client_->socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
      keep->client_->close();
      keep->keep_.reset();
    });
  }
  self = std::move(self_);  // dropped after the lock
}

void PortStream::Abort() {
  context_->TryCancel();
  absl::MutexLock lock(&mu_);
  if (!client_) return;
  auto self = shared_from_this();
  net::post(client_->get_executor(), [self] {
    error_code ignored;
    self->client_->socket().close(ignored);
  });
}

}  // namespace warden::ports
