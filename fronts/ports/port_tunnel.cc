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
  stream->context_ = http::UpstreamContext(credential.bearer);
  stream->request_.set_session_id(session_id);
  stream->request_.set_port(port);
  stream->request_.set_traffic_token(credential.traffic_token);
  {
    absl::MutexLock lock(&stream->mu_);
    stream->self_ = stream;  // until OnDone
  }
  executor->async()->ConnectPort(stream->context_.get(), stream.get());
  stream->StartWrite(&stream->request_);
  stream->StartRead(&stream->response_);
  stream->StartCall();
  if (!stream->settled_.WaitForNotificationWithDeadline(deadline)) {
    stream->context_->TryCancel();
    return absl::DeadlineExceededError(absl::StrCat("port ", port, " of sandbox ", session_id, " did not answer in time"));
  }
  if (!stream->opened_) return http::FromGrpc(stream->status_);
  return stream;
}

PortStream::~PortStream() = default;

std::function<void()> PortStream::Start(boost::beast::tcp_stream client, std::string first, std::shared_ptr<void> keep) {
  client.expires_never();
  {
    absl::MutexLock lock(&mu_);
    client_.emplace(std::move(client));
    keep_ = std::move(keep);
    started_ = true;
    if (call_done_) {
      // The port closed meanwhile: nothing to relay.
      error_code ignored;
      client_->socket().close(ignored);
      keep_.reset();
      return [] {};
    }
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
      absl::MutexLock lock(&self->mu_);
      if (self->call_done_) return;
      if (ec) {
        // The client is done sending: so is the call (the port still answers).
        if (!self->writes_done_) {
          self->writes_done_ = true;
          self->StartWritesDone();
        }
        return;
      }
      self->WriteUp(std::string(self->buffer_.data(), n));
    });
  });
}

void PortStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  if (!ok) return;  // the call ended; OnDone follows
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
    // Not opened: the call's status (OnDone) says why.
    return;
  }
  if (!ok) {
    // The port closed: the client hears the end after the last bytes.
    auto self = shared_from_this();
    absl::MutexLock lock(&mu_);
    if (client_) {
      net::dispatch(client_->get_executor(), [self] {
        error_code ignored;
        self->client_->socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
      });
    }
    return;
  }
  auto data = std::make_shared<std::string>(std::move(*response_.mutable_data()));
  auto self = shared_from_this();
  absl::MutexLock lock(&mu_);
  if (!client_) return;
  net::dispatch(client_->get_executor(), [self, data] {
    net::async_write(*self->client_, net::buffer(*data), [self, data](error_code ec, size_t) {
      if (ec) return self->Abort();
      self->StartRead(&self->response_);
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
  call_done_ = true;
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
