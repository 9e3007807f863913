#include "kernel/kernel_channel.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace warden {
namespace {

using nlohmann::json;

absl::Status Malformed(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("malformed frame from the kernel: ", why));
}

std::string String(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

MimeBundle Bundle(const json& j) {
  MimeBundle bundle;
  auto it = j.find("data");
  if (it == j.end() || !it->is_object()) return bundle;
  for (const auto& [mime, value] : it->items()) {
    // JSON values (application/json) are carried as their text.
    bundle[mime] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  return bundle;
}

}  // namespace

absl::StatusOr<std::optional<KernelMessage>> KernelChannel::Next() {
  const size_t newline = buffer_.find('\n');
  if (newline == std::string::npos) {
    if (buffer_.size() > 20) return Malformed("header longer than 20 bytes");
    return std::nullopt;
  }
  int64_t size = 0;
  if (newline == 0 || newline > 20 || !absl::SimpleAtoi(absl::string_view(buffer_).substr(0, newline), &size) ||
      size < 0) {
    return Malformed("bad length header");
  }
  if (size > max_frame_) {
    return Malformed(absl::StrCat("frame of ", size, " bytes exceeds the cap of ", max_frame_));
  }
  if (buffer_.size() < newline + 1 + static_cast<size_t>(size)) return std::nullopt;
  json j = json::parse(buffer_.begin() + newline + 1, buffer_.begin() + newline + 1 + size, nullptr,
                       /*allow_exceptions=*/false);
  buffer_.erase(0, newline + 1 + size);
  if (j.is_discarded() || !j.is_object()) return Malformed("not a JSON object");

  KernelMessage msg;
  const std::string type = String(j, "type");
  if (type == "ready") msg.type = KernelMessage::Type::kReady;
  else if (type == "display_data") msg.type = KernelMessage::Type::kDisplayData;
  else if (type == "execute_result") msg.type = KernelMessage::Type::kExecuteResult;
  else if (type == "error") msg.type = KernelMessage::Type::kError;
  else if (type == "done") msg.type = KernelMessage::Type::kDone;
  else if (type == "snapshot") msg.type = KernelMessage::Type::kSnapshot;
  else if (type == "restored") msg.type = KernelMessage::Type::kRestored;
  else return Malformed(absl::StrCat("unknown message type '", type, "'"));

  if (auto it = j.find("id"); it != j.end() && it->is_number_integer()) msg.id = it->get<int>();
  if (auto it = j.find("execution_count"); it != j.end() && it->is_number_integer()) {
    msg.execution_count = it->get<int>();
  }
  if (auto it = j.find("exit_code"); it != j.end() && it->is_number_integer()) {
    msg.exit_code = it->get<int>();
  }
  msg.status = String(j, "status");
  msg.data = Bundle(j);
  msg.ename = String(j, "ename");
  msg.evalue = String(j, "evalue");
  if (auto it = j.find("traceback"); it != j.end() && it->is_array()) {
    for (const auto& line : *it) {
      if (line.is_string()) msg.traceback.push_back(line.get<std::string>());
    }
  }
  if (msg.type == KernelMessage::Type::kReady) {
    msg.info.language = String(j, "language");
    msg.info.version = String(j, "version");
    if (auto it = j.find("warm"); it != j.end() && it->is_array()) {
      for (const auto& m : *it) {
        if (m.is_string()) msg.info.warm.push_back(m.get<std::string>());
      }
    }
    if (auto it = j.find("warm_errors"); it != j.end() && it->is_object()) {
      for (const auto& [k, v] : it->items()) msg.info.warm_errors[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  if (msg.type == KernelMessage::Type::kSnapshot || msg.type == KernelMessage::Type::kRestored) {
    const char* key = msg.type == KernelMessage::Type::kSnapshot ? "uncaptured" : "failed";
    if (auto it = j.find(key); it != j.end() && it->is_object()) {
      for (const auto& [k, v] : it->items()) msg.left_out[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
    msg.failure = String(j, "error");
  }
  if (msg.type == KernelMessage::Type::kDone && msg.status != "ok" && msg.status != "error" &&
      msg.status != "interrupted") {
    return Malformed(absl::StrCat("done with unknown status '", msg.status, "'"));
  }
  return msg;
}

std::string KernelChannel::EncodeExecute(int id, absl::string_view code, const std::vector<std::string>& env) {
  std::string out;
  if (!env.empty()) {
    std::string body;
    for (const std::string& entry : env) absl::StrAppend(&body, entry.size(), ":", entry);
    absl::StrAppend(&out, "env ", id, " ", body.size(), "\n", body);
  }
  absl::StrAppend(&out, "execute ", id, " ", code.size(), "\n", code);
  return out;
}

namespace {
std::string EncodeArchiveRequest(absl::string_view verb, int id, absl::string_view archive,
                                 absl::string_view workspace) {
  const std::string body = json{{"archive", archive}, {"workspace", workspace}}.dump();
  return absl::StrCat(verb, " ", id, " ", body.size(), "\n", body);
}
}  // namespace

std::string KernelChannel::EncodeSnapshot(int id, absl::string_view archive, absl::string_view workspace) {
  return EncodeArchiveRequest("snapshot", id, archive, workspace);
}

std::string KernelChannel::EncodeRestore(int id, absl::string_view archive, absl::string_view workspace) {
  return EncodeArchiveRequest("restore", id, archive, workspace);
}

}  // namespace warden
