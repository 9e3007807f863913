// The Connect protocol (connectrpc.com/docs/protocol), server side, as far
// as envd's clients use it over HTTP/1.1: unary calls in JSON or binary
// protobuf, and server-streaming calls whose body is a run of enveloped
// messages (flag byte, uint32 big-endian length, payload) closed by an
// end-of-stream envelope (flag 0x02) carrying `{}` or `{"error": ...}`.
// Pure functions over bytes, so the codec is unit-tested on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fronts/http/request.h"
#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace warden::e2b {

enum class ConnectEncoding { kJson, kProto };

// What a request says of itself in its headers.
struct ConnectCall {
  bool streaming = false;
  ConnectEncoding encoding = ConnectEncoding::kJson;
  absl::Duration timeout = absl::InfiniteDuration();  // Connect-Timeout-Ms
};

// Reads Content-Type (application/json or application/proto for unary
// calls; application/connect+json or +proto for streams) and
// Connect-Timeout-Ms. `streaming` is the method's kind.
absl::StatusOr<ConnectCall> ParseConnectCall(const http::Request& request, bool streaming);

constexpr uint8_t kEnvelopeCompressed = 0x01;
constexpr uint8_t kEnvelopeEndStream = 0x02;

struct Envelope {
  uint8_t flags = 0;
  std::string payload;
};
std::string EncodeEnvelope(uint8_t flags, absl::string_view payload);
// Splits a body into its envelopes; InvalidArgument for a truncated one.
absl::StatusOr<std::vector<Envelope>> DecodeEnvelopes(absl::string_view body);

// The request message of a call: for a stream, the one envelope the body
// must hold. Unknown JSON fields are ignored, as Connect servers do.
absl::Status DecodeRequest(const ConnectCall& call, absl::string_view body, google::protobuf::Message* message);
// A message in the call's encoding: the whole body of a unary answer, or
// one envelope of a stream.
std::string EncodeMessage(const ConnectCall& call, const google::protobuf::Message& message);
// The last envelope of a stream: OK -> `{}`; an error -> `{"error": ...}`.
std::string EndOfStream(const absl::Status& status);

// Connect's code names ("not_found", ...) and HTTP statuses for unary errors.
const char* ConnectCodeName(absl::StatusCode code);
unsigned ConnectHttpStatus(absl::StatusCode code);
// {"code": "not_found", "message": "..."}
nlohmann::json ConnectErrorJson(const absl::Status& status);

// Any error of a Connect route, in the shape its client reads: a unary call
// gets the JSON error with its HTTP status; a stream gets 200 and an
// end-of-stream envelope (Connect clients ignore the body of a non-200
// stream answer, and would lose the message).
http::Response ConnectErrorResponse(const absl::Status& status, const http::Request& request);

}  // namespace warden::e2b
