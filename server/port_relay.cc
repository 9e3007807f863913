#include "server/port_relay.h"

#include <array>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "egress/asio.h"
#include "server/convert.h"
#include "spdlog/spdlog.h"

namespace warden {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

constexpr size_t kChunk = 64 * 1024;
constexpr absl::Duration kConnectTimeout = absl::Seconds(10);

class PortRelay final : public grpc::ServerBidiReactor<v1::PortStreamRequest, v1::PortStreamResponse> {
 public:
  PortRelay(grpc::CallbackServerContext* ctx, Engine& engine, Tasks& tasks, net::io_context& io,
            std::optional<std::string> tenant)
      : ctx_(ctx), engine_(engine), tasks_(tasks), tenant_(std::move(tenant)),
        pipe_(std::make_shared<Pipe>(io)) {
    pipe_->relay = this;
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!opened_requested_) {
      opened_requested_ = true;
      if (!ok) return End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "name the session and port first"));
      return Open();
    }
    if (!ok) {
      // The client is done sending (or gone): the port's side still answers.
      net::post(pipe_->strand, [pipe = pipe_] {
        error_code ignored;
        pipe->socket.shutdown(tcp::socket::shutdown_send, ignored);
      });
      return;
    }
    // One message to the socket, then the next read.
    auto data = std::make_shared<std::string>(std::move(*request_.mutable_data()));
    net::post(pipe_->strand, [pipe = pipe_, data] {
      net::async_write(pipe->socket, net::buffer(*data), [pipe, data](error_code ec, size_t) {
        absl::MutexLock lock(&pipe->mu);
        if (pipe->relay == nullptr) return;
        if (ec) return pipe->relay->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the port closed"));
        pipe->relay->StartRead(&pipe->relay->request_);
      });
    });
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&pipe_->mu);
    writing_ = false;
    if (!ok) return EndLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    if (pending_end_) return EndLocked(*pending_end_);
    if (!opened_) return;
    ReadSocket();
  }

  void OnCancel() override {
    net::post(pipe_->strand, [pipe = pipe_] {
      error_code ignored;
      pipe->socket.close(ignored);
    });
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&pipe_->mu);
      pipe_->relay = nullptr;
    }
    net::post(pipe_->strand, [pipe = pipe_] {
      error_code ignored;
      pipe->socket.close(ignored);
    });
    delete this;
  }

 private:
  struct Pipe {
    explicit Pipe(net::io_context& io) : strand(net::make_strand(io)), socket(strand) {}
    net::strand<net::io_context::executor_type> strand;
    tcp::socket socket;
    std::array<char, kChunk> buffer;
    absl::Mutex mu;
    PortRelay* relay ABSL_GUARDED_BY(mu) = nullptr;  // null once the call is done
  };

  void Open() {
    const std::string session = request_.session_id();
    const int port = request_.port();
    const std::string token = request_.traffic_token();
    tasks_.Run([this, session, port, token] {
      absl::StatusOr<Engine::PortConnection> connected =
          engine_.ConnectPort(tenant_, session, port, token, absl::Now() + kConnectTimeout);
      absl::MutexLock lock(&pipe_->mu);
      if (!connected.ok()) return EndLocked(ToGrpc(connected.status()));
      error_code ec;
      const int family = [&] {
        sockaddr_storage addr{};
        socklen_t len = sizeof(addr);
        getsockname(connected->fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
        return addr.ss_family;
      }();
      pipe_->socket.assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), connected->fd.Release(), ec);
      if (ec) return EndLocked(grpc::Status(grpc::StatusCode::INTERNAL, ec.message()));
      opened_ = true;
      response_.Clear();
      response_.set_opened(true);
      response_.set_host_header(connected->host_header);
      writing_ = true;
      StartWrite(&response_);
      StartRead(&request_);
    });
  }

  // Reads the socket's next bytes into one message. With pipe_->mu held,
  // no write in flight.
  void ReadSocket() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pipe_->mu) {
    net::post(pipe_->strand, [pipe = pipe_] {
      pipe->socket.async_read_some(net::buffer(pipe->buffer), [pipe](error_code ec, size_t n) {
        absl::MutexLock lock(&pipe->mu);
        PortRelay* relay = pipe->relay;
        if (relay == nullptr) return;
        if (ec) {
          return relay->EndLocked(ec == net::error::eof ? grpc::Status::OK
                                                        : grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                                       absl::StrCat("the port: ", ec.message())));
        }
        relay->response_.Clear();
        relay->response_.set_data(pipe->buffer.data(), n);
        relay->writing_ = true;
        relay->StartWrite(&relay->response_);
      });
    });
  }

  void End(grpc::Status status) {
    absl::MutexLock lock(&pipe_->mu);
    EndLocked(std::move(status));
  }
  // Finishes the call once (after a write in flight completes).
  void EndLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pipe_->mu) {
    if (finished_) return;
    if (writing_) {
      if (!pending_end_) pending_end_ = std::move(status);
      return;
    }
    finished_ = true;
    Finish(std::move(status));
  }

  grpc::CallbackServerContext* const ctx_;
  Engine& engine_;
  Tasks& tasks_;
  const std::optional<std::string> tenant_;
  const std::shared_ptr<Pipe> pipe_;
  v1::PortStreamRequest request_;
  v1::PortStreamResponse response_;
  bool opened_requested_ = false;  // on gRPC's reads only
  bool opened_ ABSL_GUARDED_BY(pipe_->mu) = false;
  bool writing_ ABSL_GUARDED_BY(pipe_->mu) = false;
  bool finished_ ABSL_GUARDED_BY(pipe_->mu) = false;
  std::optional<grpc::Status> pending_end_ ABSL_GUARDED_BY(pipe_->mu);
};

}  // namespace

grpc::ServerBidiReactor<v1::PortStreamRequest, v1::PortStreamResponse>* NewPortRelay(
    grpc::CallbackServerContext* ctx, Engine& engine, Tasks& tasks, boost::asio::io_context& io,
    std::optional<std::string> tenant) {
  return new PortRelay(ctx, engine, tasks, io, std::move(tenant));
}

}  // namespace warden
