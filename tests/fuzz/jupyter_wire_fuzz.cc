// WebSocket messages from a Jupyter client (the Kernel Gateway front): a
// JSON text frame or a v1.kernel.websocket.jupyter.org binary frame. The
// first byte picks the format. Decoding never crashes, and what decodes
// encodes and decodes again to the same message.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fronts/jupyter/wire.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto format = (data[0] & 1) ? warden::jupyter::WireFormat::kV1 : warden::jupyter::WireFormat::kJson;
  const std::string frame(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto message = warden::jupyter::DecodeFrame(frame, format);
  if (!message.ok()) return 0;
  const std::string again = warden::jupyter::EncodeFrame(*message, format);
  auto decoded = warden::jupyter::DecodeFrame(again, format);
  FUZZ_CHECK(decoded.ok());
  FUZZ_CHECK(decoded->channel == message->channel);
  FUZZ_CHECK(decoded->msg_type() == message->msg_type());
  FUZZ_CHECK(decoded->buffers.size() == message->buffers.size());
  return 0;
}
