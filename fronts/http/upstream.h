// How a front calls warden.v1 for a client: a ClientContext carrying the
// client's token, and gRPC statuses back as absl::Status for the protocol's
// error renderer. The only gRPC piece of fronts/http (its own target,
// warden::http_upstream), so the server itself stays free of gRPC.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace warden::http {

// "authorization: Bearer TOKEN" when `token` is set (the daemon maps it to
// the same tenant as a gRPC caller); a deadline `timeout` from now unless
// it is infinite.
std::unique_ptr<grpc::ClientContext> UpstreamContext(absl::string_view token,
                                                     absl::Duration timeout = absl::InfiniteDuration());

absl::Status FromGrpc(const grpc::Status& status);

}  // namespace warden::http
