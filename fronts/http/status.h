// One mapping from absl::Status codes to HTTP status codes, for every front.
#pragma once

#include "absl/status/status.h"

namespace warden::http {

// INVALID_ARGUMENT 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403,
// NOT_FOUND 404, ALREADY_EXISTS and ABORTED 409, FAILED_PRECONDITION 412,
// RESOURCE_EXHAUSTED 429, CANCELLED 499, UNIMPLEMENTED 501,
// UNAVAILABLE 503, DEADLINE_EXCEEDED 504, anything else 500.
unsigned HttpStatusFor(absl::StatusCode code);

}  // namespace warden::http
