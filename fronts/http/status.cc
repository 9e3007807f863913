#include "fronts/http/status.h"

#include "absl/strings/string_view.h"

namespace warden::http {

unsigned HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kFailedPrecondition:
      return 412;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::optional<int64_t> RetryAfterSeconds(const absl::Status& status) {
  constexpr absl::string_view kHint = "retry in about ";
  const absl::string_view message = status.message();
  const size_t at = message.rfind(kHint);
  if (at == absl::string_view::npos) return std::nullopt;
  // The message is not NUL-terminated: parse the digits by hand.
  size_t i = at + kHint.size();
  int64_t ms = 0;
  const size_t first_digit = i;
  while (i < message.size() && message[i] >= '0' && message[i] <= '9' && ms < (int64_t{1} << 40)) {
    ms = ms * 10 + (message[i++] - '0');
  }
  if (i == first_digit || message.substr(i, 3) != " ms") return std::nullopt;
  return (ms + 999) / 1000;
}

}  // namespace warden::http
