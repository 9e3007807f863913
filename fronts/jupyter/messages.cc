#include "fronts/jupyter/messages.h"

#include <sys/random.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace warden::jupyter {
namespace {

bool IsBinaryMime(absl::string_view mime) {
  if (absl::StartsWith(mime, "image/")) return mime != "image/svg+xml";
  return mime == "application/pdf" || mime == "application/octet-stream";
}

bool IsJsonMime(absl::string_view mime) { return mime == "application/json" || absl::EndsWith(mime, "+json"); }

}  // namespace

std::string NewUuid() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof(b)) {
    ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4
  b[8] = (b[8] & 0x3f) | 0x80;  // RFC 4122 variant
  const std::string hex = absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(b), sizeof(b)));
  return absl::StrCat(hex.substr(0, 8), "-", hex.substr(8, 4), "-", hex.substr(12, 4), "-", hex.substr(16, 4), "-",
                      hex.substr(20));
}

Message MakeMessage(const std::string& channel, const std::string& msg_type, nlohmann::json content,
                    const nlohmann::json& parent_header, const std::string& kernel_session) {
  Message m;
  m.channel = channel;
  m.header = {
      {"msg_id", NewUuid()},
      {"msg_type", msg_type},
      {"session", kernel_session},
      {"username", "warden"},
      {"version", "5.3"},
      {"date", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone())},
  };
  m.parent_header = parent_header.is_object() ? parent_header : nlohmann::json::object();
  m.content = std::move(content);
  return m;
}

nlohmann::json MimeBundle(const v1::Result& result) {
  nlohmann::json data = nlohmann::json::object();
  for (const auto& [mime, bytes] : result.data()) {
    if (IsBinaryMime(mime)) {
      data[mime] = absl::Base64Escape(bytes);
    } else if (IsJsonMime(mime)) {
      nlohmann::json parsed = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
      data[mime] = parsed.is_discarded() ? nlohmann::json(bytes) : parsed;
    } else {
      data[mime] = bytes;
    }
  }
  return data;
}

nlohmann::json ErrorContent(const v1::Error& error) {
  nlohmann::json traceback = nlohmann::json::array();
  for (const std::string& line : error.traceback()) traceback.push_back(line);
  if (traceback.empty()) traceback.push_back(absl::StrCat(error.name(), ": ", error.value()));
  return {{"ename", error.name()}, {"evalue", error.value()}, {"traceback", traceback}};
}

nlohmann::json ErrorForOutcome(const v1::ExecuteResponse& summary) {
  v1::Error error;
  switch (summary.outcome()) {
    case v1::OUTCOME_WALL_TIMEOUT:
    case v1::OUTCOME_CPU_TIMEOUT:
      error.set_name("TimeoutError");
      break;
    case v1::OUTCOME_MEMORY_LIMIT:
      error.set_name("MemoryError");
      break;
    case v1::OUTCOME_INTERRUPTED:
      error.set_name("KeyboardInterrupt");
      break;
    case v1::OUTCOME_SESSION_LOST:
      error.set_name("DeadKernelError");
      break;
    case v1::OUTCOME_ERROR:  // bash: the cell's last command failed
    case v1::OUTCOME_NONZERO_EXIT:
      error.set_name("NonZeroExitError");
      break;
    default:
      error.set_name("WardenError");
      break;
  }
  std::string value = summary.message();
  if (value.empty() && summary.exit_code() > 0) value = absl::StrCat("exit code ", summary.exit_code());
  if (value.empty()) value = v1::Outcome_Name(summary.outcome());
  if (summary.outcome() == v1::OUTCOME_VIOLATION && !summary.violation().empty()) {
    value = absl::StrCat(value, " (system call ", summary.violation(), ")");
  }
  if (summary.outcome() == v1::OUTCOME_SESSION_LOST) {
    value = absl::StrCat(value, "; restart the kernel to go on");
  }
  error.set_value(value);
  return ErrorContent(error);
}

nlohmann::json ErrorForStatus(const std::string& message) {
  v1::Error error;
  error.set_name("WardenError");
  error.set_value(message);
  return ErrorContent(error);
}

}  // namespace warden::jupyter
