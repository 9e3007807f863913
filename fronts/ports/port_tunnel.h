// PortStream: one client connection of an exposed port, relayed over one
// warden.v1 ConnectPort call (fronts/ports/ports_front.h). Opened first (the
// call authorised and connected to the port, or refused), then started
// with the client's connection: the client's bytes go up as messages, one
// at a time, each written before the next socket read; the port's come back
// one message at a time, each written to the client before the next is
// read; neither side buffers more than one chunk. Holds no thread: gRPC's
// callbacks and the connection's strand drive it.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "boost/beast/core/tcp_stream.hpp"
#include "grpcpp/grpcpp.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden::ports {

class PortStream : public grpc::ClientBidiReactor<v1::PortStreamRequest, v1::PortStreamResponse>,
                   public std::enable_shared_from_this<PortStream> {
 public:
  struct Credential {
    std::string bearer;         // the tenant's token (or an E2B key)
    std::string traffic_token;  // the session's own
  };
  // Opens the call and waits (until `deadline`) for the port to be
  // connected; the daemon's refusal as a status otherwise.
  static absl::StatusOr<std::shared_ptr<PortStream>> Open(v1::Executor::StubInterface* executor,
                                                         const Credential& credential, const std::string& session_id,
                                                         int port, absl::Time deadline);
  ~PortStream() override;

  // The Host the session's server should see ("" as the client sent it).
  const std::string& host_header() const { return host_header_; }
  // Relays `client` (its first bytes `first`, already read) until either side
  // ends; `keep` is held until then. Returns how to end it early. Call on
  // the client stream's strand, once.
  std::function<void()> Start(boost::beast::tcp_stream client, std::string first, std::shared_ptr<void> keep);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  PortStream() = default;
  void ReadClient();   // posts a read of the client's next bytes
  void WriteUp(std::string data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Abort();        // any thread: cancel the call, close the client
  // The read and/or write flow has ended: its hold goes (once). Not under mu_.
  void Release(bool read, bool write) ABSL_LOCKS_EXCLUDED(mu_);
  // The caller's handle is gone: unless Start ran, the call ends.
  void Unclaimed() ABSL_LOCKS_EXCLUDED(mu_);

  std::unique_ptr<grpc::ClientContext> context_;
  v1::PortStreamRequest request_;
  v1::PortStreamResponse response_;
  std::string host_header_;
  absl::Notification settled_;  // opened, or done before it
  bool opened_ = false;         // set before settled_
  grpc::Status status_;         // set before settled_ when not opened

  absl::Mutex mu_;
  std::shared_ptr<PortStream> self_ ABSL_GUARDED_BY(mu_);  // held until the call and the client are done
  std::optional<boost::beast::tcp_stream> client_;  // on its strand
  std::shared_ptr<void> keep_;
  std::array<char, 64 * 1024> buffer_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool opening_written_ ABSL_GUARDED_BY(mu_) = false;  // the first message's write completed
  std::optional<std::string> pending_first_ ABSL_GUARDED_BY(mu_);  // Start's bytes, until then
  // The holds on the call (Open): one per flow, each removed once, when its
  // flow has ended (gRPC calls OnDone only after both).
  bool read_held_ ABSL_GUARDED_BY(mu_) = true;
  bool write_held_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace warden::ports
