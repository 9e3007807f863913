// One mapping from absl::Status codes to HTTP status codes, for every front.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/status.h"

namespace warden::http {

// INVALID_ARGUMENT 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403,
// NOT_FOUND 404, ALREADY_EXISTS and ABORTED 409, FAILED_PRECONDITION 412,
// RESOURCE_EXHAUSTED 429, CANCELLED 499, UNIMPLEMENTED 501,
// UNAVAILABLE 503, DEADLINE_EXCEEDED 504, anything else 500.
unsigned HttpStatusFor(absl::StatusCode code);

// The Retry-After (whole seconds, rounded up) of an error that says when to
// retry: wardend's refusals end "retry in about N ms" (docs/api.md). Clients
// such as E2B's SDKs retry a 429 or 503 that carries it.
std::optional<int64_t> RetryAfterSeconds(const absl::Status& status);

}  // namespace warden::http
