// Bodies of envd's Connect-RPC calls on the E2B front (process.Process,
// filesystem.Filesystem): the first byte picks the call's encoding (JSON or
// protobuf, unary or enveloped stream) and the message; the rest is the
// body. Decoding never crashes; envelopes that decode re-encode to the same
// bytes; a message that decodes encodes and decodes again.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "envd/filesystem.pb.h"
#include "envd/process.pb.h"
#include "fronts/e2b/connect.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

std::unique_ptr<google::protobuf::Message> MessageFor(uint8_t choice) {
  switch (choice % 6) {
    case 0: return std::make_unique<process::StartRequest>();
    case 1: return std::make_unique<process::SendInputRequest>();
    case 2: return std::make_unique<process::SendSignalRequest>();
    case 3: return std::make_unique<filesystem::ListDirRequest>();
    case 4: return std::make_unique<filesystem::MoveRequest>();
    default: return std::make_unique<filesystem::StatRequest>();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  warden::e2b::ConnectCall call;
  call.streaming = selector & 0x80;
  call.encoding = (selector & 0x40) ? warden::e2b::ConnectEncoding::kProto : warden::e2b::ConnectEncoding::kJson;

  auto envelopes = warden::e2b::DecodeEnvelopes(body);
  if (envelopes.ok()) {
    std::string again;
    for (const auto& e : *envelopes) again += warden::e2b::EncodeEnvelope(e.flags, e.payload);
    FUZZ_CHECK(again == body);
  }

  std::unique_ptr<google::protobuf::Message> message = MessageFor(selector);
  if (!warden::e2b::DecodeRequest(call, body, message.get()).ok()) return 0;
  const std::string encoded = warden::e2b::EncodeMessage(call, *message);
  std::unique_ptr<google::protobuf::Message> decoded = MessageFor(selector);
  // EncodeMessage frames a stream's message in an envelope; a unary one is bare.
  FUZZ_CHECK(warden::e2b::DecodeRequest(call, encoded, decoded.get()).ok());
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(*decoded, *message));
  return 0;
}
