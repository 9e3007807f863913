// KernelChannel: the supervisor's side of the kernel protocol's framing
// (docs/kernel-protocol.md). Bytes read from the channel socket go in; whole,
// validated messages come out. A frame that is malformed or larger than the
// cap is an error: the session is then lost, never confused.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden {

// A Jupyter MIME bundle: MIME type -> data. Binary types (image/png) are
// base64 text, exactly as Jupyter and every agent framework carry them.
using MimeBundle = std::map<std::string, std::string>;

struct KernelInfo {
  std::string language;
  std::string version;
  std::vector<std::string> warm;
  std::map<std::string, std::string> warm_errors;
};

struct KernelMessage {
  enum class Type { kReady, kDisplayData, kExecuteResult, kError, kDone, kSnapshot, kRestored };
  Type type = Type::kDone;
  int id = 0;
  int execution_count = 0;
  std::string status;           // kDone: ok | error | interrupted
  std::optional<int> exit_code;  // kDone, bash
  MimeBundle data;              // kDisplayData, kExecuteResult
  std::string ename, evalue;    // kError
  std::vector<std::string> traceback;
  KernelInfo info;              // kReady
  // kSnapshot: what was left out, by name (a variable, or a workspace path),
  // with the reason; kRestored: what could not be restored.
  std::map<std::string, std::string> left_out;
  std::string failure;          // kSnapshot / kRestored: why it failed as a whole
};

class KernelChannel {
 public:
  explicit KernelChannel(int64_t max_frame_bytes = 64LL << 20) : max_frame_(max_frame_bytes) {}

  void Feed(const char* data, size_t n) { buffer_.append(data, n); }
  void Reset() { buffer_.clear(); }
  // The next complete message, or nullopt until more bytes arrive.
  absl::StatusOr<std::optional<KernelMessage>> Next();

  // An `execute` frame, preceded by an `env` frame when the cell has
  // variables of its own ("KEY=value"; docs/kernel-protocol.md).
  static std::string EncodeExecute(int id, absl::string_view code,
                                   const std::vector<std::string>& env = {});
  // A snapshot or restore request: the archive's path and the workspace's,
  // both as the kernel sees them.
  static std::string EncodeSnapshot(int id, absl::string_view archive, absl::string_view workspace);
  static std::string EncodeRestore(int id, absl::string_view archive, absl::string_view workspace);

 private:
  int64_t max_frame_;
  std::string buffer_;
};

}  // namespace warden
