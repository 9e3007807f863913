// Jupyter messages on a kernel's WebSocket (/api/kernels/{id}/channels), in
// the two framings clients use: plain JSON text frames (what Kernel Gateway,
// AutoGen and smolagents speak; replies also carry msg_type, msg_id,
// parent_header and channel at the top level, which those clients read),
// and the binary `v1.kernel.websocket.jupyter.org` subprotocol that
// @jupyterlab/services offers: a little-endian uint64 count n, n uint64
// offsets, then the channel name, header, parent_header, metadata and
// content (JSON each) and any binary buffers, at those offsets.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace warden::jupyter {

inline constexpr absl::string_view kV1Subprotocol = "v1.kernel.websocket.jupyter.org";

enum class WireFormat {
  kJson,  // text frames, one JSON object each
  kV1,    // binary frames, v1.kernel.websocket.jupyter.org
};

struct Message {
  std::string channel;  // shell, iopub, control, stdin
  nlohmann::json header = nlohmann::json::object();
  nlohmann::json parent_header = nlohmann::json::object();
  nlohmann::json metadata = nlohmann::json::object();
  nlohmann::json content = nlohmann::json::object();
  std::vector<std::string> buffers;

  std::string msg_type() const;  // header.msg_type, "" when absent
  std::string msg_id() const;    // header.msg_id, "" when absent
};

// One frame from a client. InvalidArgument, saying what is wrong, for
// anything that is not a Jupyter message (bad JSON, no header or msg_type,
// offsets outside the frame). A JSON message without `channel` is put on
// control for interrupt_request and shutdown_request, on shell otherwise.
absl::StatusOr<Message> DecodeFrame(absl::string_view frame, WireFormat format);

// One frame to a client: a JSON text frame or a v1 binary frame. Strings
// that are not UTF-8 (a program may print anything) are repaired, never
// refused.
std::string EncodeFrame(const Message& message, WireFormat format);

// The WebSocket subprotocol to accept out of the client's offer
// (Sec-WebSocket-Protocol, comma-separated): kV1Subprotocol when offered,
// else none (plain JSON).
WireFormat ChooseWireFormat(absl::string_view offered_subprotocols);

// A JSON text that never throws on bytes that are not UTF-8.
std::string DumpJson(const nlohmann::json& value);

}  // namespace warden::jupyter
