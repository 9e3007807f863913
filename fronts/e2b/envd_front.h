// envd's Connect-RPC services on the HTTP front (E2B "Tier B"): what the E2B
// SDKs' sandbox.commands.* and sandbox.files.* (list, exists, getInfo,
// makeDir, rename, remove) call, translated to warden.v1.
//
//   POST /process.Process/{Start,Connect}        server streams (connect+json|proto)
//   POST /process.Process/{List,SendInput,SendSignal,CloseStdin}   unary (json|proto)
//   POST /filesystem.Filesystem/{Stat,ListDir,MakeDir,Move,Remove} unary
//   POST /filesystem.Filesystem/WatchDir            server stream (WatchPath)
//   POST /filesystem.Filesystem/{CreateWatcher,GetWatcherEvents,RemoveWatcher}
//        unary: the polled watcher, held by the daemon (warden.v1's CreateWatcher)
//   StreamInput: `unimplemented`.
//
// A process is a warden.v1 command of the sandbox's session; its pid is the
// command's id. Every process runs in the background in warden.v1's sense,
// as in envd: a client that goes away (handle.disconnect()) leaves it
// running until it ends, its timeout (the call's Connect-Timeout-Ms, the
// SDK's timeoutMs) passes, it is killed, or the sandbox ends. Commands run
// as the sandbox's one unprivileged user, whatever `user` the SDK names.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fronts/http/router.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden::e2b {

// The sandbox an envd request names, and the Warden token to call with.
struct EnvdSandbox {
  std::string id;     // the session id
  std::string token;  // the Warden token of the client that created or connected it
  std::string tenant;  // whose it is (for counting its streams)
};
using FindSandbox = std::function<absl::StatusOr<EnvdSandbox>(const http::Request&)>;

struct EnvdOptions {
  size_t max_body_bytes = 4 << 20;  // a request (stdin data is the largest)
  // Keepalive events on a quiet stream: the client's Keepalive-Ping-Interval
  // (seconds), within these bounds; `default_keepalive` without the header.
  absl::Duration default_keepalive = absl::Seconds(50);
  absl::Duration min_keepalive = absl::Seconds(1);
  // How long a unary call may take upstream, and a stream to start.
  absl::Duration call_timeout = absl::Minutes(2);
  // The tenant a request counts as on the handler threads before its
  // sandbox is looked up (http::RouteOptions::tenant_of); none: "".
  std::function<std::string(const http::Request&)> tenant_of;
};

// `executor` is not owned and outlives the router's use.
void AddEnvdRoutes(http::Router& router, v1::Executor::StubInterface* executor, FindSandbox find_sandbox,
                   EnvdOptions options);

}  // namespace warden::e2b
