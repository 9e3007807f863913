#include "fronts/http/upstream.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace warden::http {

std::unique_ptr<grpc::ClientContext> UpstreamContext(absl::string_view token, absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  if (timeout != absl::InfiniteDuration()) context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

absl::Status FromGrpc(const grpc::Status& status) {
  // gRPC's codes are absl's codes, number for number.
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace warden::http
