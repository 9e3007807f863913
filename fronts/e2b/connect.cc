#include "fronts/e2b/connect.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace warden::e2b {
namespace {

// The media type without parameters, lower case.
std::string MediaType(absl::string_view content_type) {
  const size_t semicolon = content_type.find(';');
  return absl::AsciiStrToLower(absl::StripAsciiWhitespace(content_type.substr(0, semicolon)));
}

}  // namespace

absl::StatusOr<ConnectCall> ParseConnectCall(const http::Request& request, bool streaming) {
  ConnectCall call;
  call.streaming = streaming;
  const std::string type = MediaType(request.Header("Content-Type"));
  const absl::string_view prefix = streaming ? "application/connect+" : "application/";
  if (type == absl::StrCat(prefix, "json")) {
    call.encoding = ConnectEncoding::kJson;
  } else if (type == absl::StrCat(prefix, "proto")) {
    call.encoding = ConnectEncoding::kProto;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "this Connect ", streaming ? "streaming" : "unary", " method takes Content-Type ", prefix, "json or ",
        prefix, "proto, not '", type, "'"));
  }
  const std::string encoding =
      absl::AsciiStrToLower(request.Header(streaming ? "Connect-Content-Encoding" : "Content-Encoding"));
  if (!encoding.empty() && encoding != "identity") {
    return absl::UnimplementedError(
        absl::StrCat("compressed requests (", encoding, ") are not supported here; send them uncompressed"));
  }
  const std::string timeout = request.Header("Connect-Timeout-Ms");
  if (!timeout.empty()) {
    int64_t ms = 0;
    if (timeout.size() > 10 || !absl::SimpleAtoi(timeout, &ms) || ms < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Connect-Timeout-Ms must be a positive number of milliseconds (at most 10 digits), not '",
                       timeout, "'"));
    }
    if (ms > 0) call.timeout = absl::Milliseconds(ms);
  }
  return call;
}

std::string EncodeEnvelope(uint8_t flags, absl::string_view payload) {
  const uint32_t size = static_cast<uint32_t>(payload.size());
  std::string out;
  out.reserve(5 + payload.size());
  out.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((size >> shift) & 0xff));
  out.append(payload.data(), payload.size());
  return out;
}

absl::StatusOr<std::vector<Envelope>> DecodeEnvelopes(absl::string_view body) {
  std::vector<Envelope> out;
  while (!body.empty()) {
    if (body.size() < 5) {
      return absl::InvalidArgumentError("the request body ends inside an envelope's 5-byte prefix");
    }
    const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(body[i])); };
    const uint32_t size = byte(1) << 24 | byte(2) << 16 | byte(3) << 8 | byte(4);
    if (body.size() - 5 < size) {
      return absl::InvalidArgumentError(absl::StrCat("an envelope announces ", size, " bytes but the body holds ",
                                                     body.size() - 5));
    }
    out.push_back({static_cast<uint8_t>(body[0]), std::string(body.substr(5, size))});
    body.remove_prefix(5 + size);
  }
  return out;
}

absl::Status DecodeRequest(const ConnectCall& call, absl::string_view body, google::protobuf::Message* message) {
  std::string payload;
  if (call.streaming) {
    auto envelopes = DecodeEnvelopes(body);
    if (!envelopes.ok()) return envelopes.status();
    if (envelopes->size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a server-streaming request holds exactly one enveloped message; this one holds ", envelopes->size()));
    }
    if ((*envelopes)[0].flags & kEnvelopeCompressed) {
      return absl::UnimplementedError("compressed messages are not supported here; send them uncompressed");
    }
    payload = std::move((*envelopes)[0].payload);
  } else {
    payload = std::string(body);
  }
  if (call.encoding == ConnectEncoding::kProto) {
    if (!message->ParseFromString(payload)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the request is not a valid binary ", message->GetDescriptor()->full_name()));
    }
    return absl::OkStatus();
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto parsed = google::protobuf::util::JsonStringToMessage(payload.empty() ? "{}" : payload, message, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the request is not a valid JSON ",
                                                   message->GetDescriptor()->full_name(), ": ",
                                                   parsed.ToString()));
  }
  return absl::OkStatus();
}

std::string EncodeMessage(const ConnectCall& call, const google::protobuf::Message& message) {
  std::string payload;
  if (call.encoding == ConnectEncoding::kProto) {
    message.SerializeToString(&payload);
  } else {
    // Cannot fail for a message built here (no Any fields).
    (void)google::protobuf::util::MessageToJsonString(message, &payload);
  }
  return call.streaming ? EncodeEnvelope(0, payload) : payload;
}

std::string EndOfStream(const absl::Status& status) {
  nlohmann::json end = nlohmann::json::object();
  if (!status.ok()) end["error"] = ConnectErrorJson(status);
  return EncodeEnvelope(kEnvelopeEndStream, end.dump());
}

const char* ConnectCodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kCancelled: return "canceled";
    case absl::StatusCode::kInvalidArgument: return "invalid_argument";
    case absl::StatusCode::kDeadlineExceeded: return "deadline_exceeded";
    case absl::StatusCode::kNotFound: return "not_found";
    case absl::StatusCode::kAlreadyExists: return "already_exists";
    case absl::StatusCode::kPermissionDenied: return "permission_denied";
    case absl::StatusCode::kResourceExhausted: return "resource_exhausted";
    case absl::StatusCode::kFailedPrecondition: return "failed_precondition";
    case absl::StatusCode::kAborted: return "aborted";
    case absl::StatusCode::kOutOfRange: return "out_of_range";
    case absl::StatusCode::kUnimplemented: return "unimplemented";
    case absl::StatusCode::kInternal: return "internal";
    case absl::StatusCode::kUnavailable: return "unavailable";
    case absl::StatusCode::kDataLoss: return "data_loss";
    case absl::StatusCode::kUnauthenticated: return "unauthenticated";
    default: return "unknown";
  }
}

unsigned ConnectHttpStatus(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kCancelled: return 499;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted: return 409;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kUnauthenticated: return 401;
    default: return 500;
  }
}

nlohmann::json ConnectErrorJson(const absl::Status& status) {
  return {{"code", ConnectCodeName(status.code())}, {"message", std::string(status.message())}};
}

http::Response ConnectErrorResponse(const absl::Status& status, const http::Request& request) {
  if (absl::StartsWithIgnoreCase(request.Header("Content-Type"), "application/connect+")) {
    http::Response response;
    response.status = 200;
    response.content_type = absl::StartsWithIgnoreCase(request.Header("Content-Type"), "application/connect+proto")
                                ? "application/connect+proto"
                                : "application/connect+json";
    response.body = EndOfStream(status);
    return response;
  }
  return http::Response::Json(ConnectHttpStatus(status.code()), ConnectErrorJson(status));
}

}  // namespace warden::e2b
