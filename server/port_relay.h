// PortRelay: the daemon's side of ConnectPort, a byte stream between a gRPC
// call and a connection to a port on a session's loopback (an exposed port;
// Engine::ConnectPort). One reactor per call: the socket is read on the
// egress proxy's I/O threads and written to the call one message at a time,
// and each message the call brings is written to the socket before the
// next is read, so neither side buffers more than one chunk (64 KiB). The
// call ends when the port's side closes (after its last bytes), when the
// client cancels, or on a failure either way; the client closing its side
// half-closes the socket (an HTTP client may still wait for its answer).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "boost/asio/io_context.hpp"
#include "grpcpp/grpcpp.h"
#include "server/engine.h"
#include "server/executor_service.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden {

// The reactor for one ConnectPort call. `tenant` is the caller's (nullopt:
// no token, the session's traffic token or public ports decide); `io` runs
// the socket; `tasks` runs the blocking connect.
grpc::ServerBidiReactor<v1::PortStreamRequest, v1::PortStreamResponse>* NewPortRelay(
    grpc::CallbackServerContext* ctx, Engine& engine, Tasks& tasks, boost::asio::io_context& io,
    std::optional<std::string> tenant);

}  // namespace warden
