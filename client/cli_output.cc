#include "client/cli_output.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace warden::cli {
namespace {

std::string WithoutPrefix(const std::string& name, absl::string_view prefix) {
  return absl::StartsWith(name, prefix) ? name.substr(prefix.size()) : name;
}

nlohmann::json StringOrNull(const std::string& text) {
  return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
}

// Labels sorted by key (protobuf maps have no order).
std::map<std::string, std::string> SortedLabels(const v1::Session& session) {
  return {session.labels().begin(), session.labels().end()};
}

std::string LabelsText(const v1::Session& session) {
  return absl::StrJoin(SortedLabels(session), ",", absl::PairFormatter("="));
}

}  // namespace

std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string text;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      bool last = i + 1 == row.size();
      absl::StrAppend(&text, row[i], last ? "" : std::string(widths[i] - row[i].size() + 2, ' '));
    }
    text += '\n';
  }
  return text;
}

std::string OutcomeName(v1::Outcome outcome) {
  return WithoutPrefix(v1::Outcome_Name(outcome), "OUTCOME_");
}

std::string LanguageName(v1::Language language) {
  return WithoutPrefix(v1::Language_Name(language), "LANGUAGE_");
}

std::string SessionStateName(v1::SessionState state) {
  return WithoutPrefix(v1::SessionState_Name(state), "SESSION_STATE_");
}

bool IsBinaryMime(absl::string_view mime) {
  if (absl::StartsWith(mime, "text/")) return false;
  if (absl::EndsWith(mime, "+json") || absl::EndsWith(mime, "+xml")) return false;  // svg too
  static constexpr absl::string_view kTextApplications[] = {
      "application/json", "application/javascript", "application/xml", "application/x-latex"};
  return std::find(std::begin(kTextApplications), std::end(kTextApplications), mime) ==
         std::end(kTextApplications);
}

nlohmann::json ResultToJson(const v1::Result& result) {
  nlohmann::json bundle = nlohmann::json::object();
  for (const auto& [mime, data] : result.data()) {
    bundle[mime] = IsBinaryMime(mime) ? absl::Base64Escape(data) : data;
  }
  return bundle;
}

nlohmann::json ExecuteResponseToJson(const v1::ExecuteResponse& response) {
  nlohmann::json results = nlohmann::json::array();
  for (const v1::Result& result : response.results()) results.push_back(ResultToJson(result));
  nlohmann::json error = nullptr;
  if (response.has_error()) {
    error = {{"name", response.error().name()},
             {"value", response.error().value()},
             {"traceback", response.error().traceback()}};
  }
  return {
      {"outcome", OutcomeName(response.outcome())},
      {"exit_code", response.exit_code()},
      {"signal", response.signal()},
      {"stdout", response.stdout()},
      {"stderr", response.stderr()},
      {"stdout_truncated", response.stdout_truncated()},
      {"stderr_truncated", response.stderr_truncated()},
      {"error", error},
      {"results", results},
      {"execution_count", response.execution_count()},
      {"wall_ms", response.wall_ms()},
      {"cpu_ms", response.cpu_ms()},
      {"peak_memory_bytes", response.peak_memory_bytes()},
      {"violation", StringOrNull(response.violation())},
      {"message", StringOrNull(response.message())},
      {"session_id", StringOrNull(response.session_id())},
  };
}

namespace {

// Null when the session has no policy of its own (its pool's applies).
nlohmann::json NetworkToJson(const v1::Session& session) {
  if (!session.has_network()) return nullptr;
  const v1::NetworkPolicy& n = session.network();
  nlohmann::json secrets = nlohmann::json::array();
  for (const v1::SecretBinding& secret : n.secrets()) {
    secrets.push_back({{"name", secret.name()}, {"hosts", std::vector<std::string>(secret.hosts().begin(), secret.hosts().end())}});
  }
  nlohmann::json header_hosts = nlohmann::json::array();
  for (const v1::HeaderRule& rule : n.header_rules()) header_hosts.push_back(rule.host());
  return {{"allow_by_default", n.allow_by_default()},
          {"allow", std::vector<std::string>(n.allow().begin(), n.allow().end())},
          {"deny", std::vector<std::string>(n.deny().begin(), n.deny().end())},
          {"secrets", secrets},
          {"header_rule_hosts", header_hosts}};
}

}  // namespace

std::string NetworkText(const v1::Session& s) {
  if (!s.has_network()) return "its pool's policy (none unless the operator gave the pool one)";
  const v1::NetworkPolicy& n = s.network();
  std::vector<std::string> parts;
  if (n.allow_by_default()) parts.push_back("everything not denied");
  if (!n.allow().empty()) parts.push_back(absl::StrCat("allow ", absl::StrJoin(n.allow(), ", ")));
  if (!n.deny().empty()) parts.push_back(absl::StrCat("deny ", absl::StrJoin(n.deny(), ", ")));
  for (const v1::SecretBinding& secret : n.secrets()) {
    parts.push_back(absl::StrCat("secret ", secret.name(), " for ", absl::StrJoin(secret.hosts(), ", ")));
  }
  if (parts.empty()) return "none";
  return absl::StrJoin(parts, "; ");
}

nlohmann::json VolumesToJson(const v1::Session& session) {
  nlohmann::json volumes = nlohmann::json::array();
  for (const v1::VolumeMount& m : session.volumes()) {
    volumes.push_back({{"volume", m.volume()}, {"path", m.path()}, {"read_only", m.read_only()}});
  }
  return volumes;
}

nlohmann::json SessionToJson(const v1::Session& session) {
  const v1::Limits& limits = session.limits();
  return {
      {"id", session.id()},
      {"language", LanguageName(session.language())},
      {"state", SessionStateName(session.state())},
      {"labels", SortedLabels(session)},
      {"created_unix_ms", session.created_unix_ms()},
      {"expires_unix_ms", session.expires_unix_ms()},
      {"age_ms", session.age_ms()},
      {"idle_ms", session.idle_ms()},
      {"memory_bytes", session.memory_bytes()},
      {"execution_count", session.execution_count()},
      {"lost_reason", StringOrNull(session.lost_reason())},
      {"network", NetworkToJson(session)},
      {"network_usage",
       {{"bytes_out", session.network_usage().bytes_out()},
        {"bytes_in", session.network_usage().bytes_in()},
        {"connections", session.network_usage().connections()},
        {"refused", session.network_usage().refused()},
        {"open", session.network_usage().open()}}},
      {"public_ports", session.ports().public_()},
      {"traffic_token", StringOrNull(session.traffic_token())},
      {"limits",
       {{"wall_ms", limits.wall_ms()},
        {"cpu_ms", limits.cpu_ms()},
        {"memory_mb", limits.memory_mb()},
        {"output_bytes", limits.output_bytes()}}},
      {"volumes", VolumesToJson(session)},
  };
}

nlohmann::json FileInfoToJson(const v1::FileInfo& file) {
  return {{"path", file.path()}, {"size", file.size()}, {"type", file.type()}};
}

std::string DumpJson(const nlohmann::json& json) {
  return json.dump(2, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string FormatDuration(int64_t ms) {
  if (ms < 1000) return absl::StrCat(std::max<int64_t>(ms, 0), "ms");
  int64_t s = ms / 1000;
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(std::max<int64_t>(bytes, 0), " B");
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string RenderResultText(const v1::Result& result) {
  std::string text;
  auto plain = result.data().find("text/plain");
  bool has_plain = plain != result.data().end();
  if (has_plain) {
    text = plain->second;
    if (!text.empty() && text.back() != '\n') text += '\n';
  }
  std::map<std::string, size_t> others;  // sorted, for a stable order
  for (const auto& [mime, data] : result.data()) {
    if (mime == "text/plain") continue;
    if (!has_plain || IsBinaryMime(mime)) others[mime] = data.size();
  }
  for (const auto& [mime, size] : others)
    absl::StrAppend(&text, "[", mime, ", ", size, " bytes]\n");
  return text;
}

std::string RenderErrorText(const v1::Error& error) {
  if (error.traceback().empty()) {
    return error.value().empty() ? absl::StrCat(error.name(), "\n")
                                 : absl::StrCat(error.name(), ": ", error.value(), "\n");
  }
  std::string text = absl::StrJoin(error.traceback(), "\n");
  if (text.back() != '\n') text += '\n';
  return text;
}

std::string RenderOutcomeNotes(const v1::ExecuteResponse& response) {
  std::string notes;
  if (response.stdout_truncated()) notes += "warden: stdout was truncated at the output limit\n";
  if (response.stderr_truncated()) notes += "warden: stderr was truncated at the output limit\n";
  switch (response.outcome()) {
    case v1::OUTCOME_OK:
    case v1::OUTCOME_ERROR:
    case v1::OUTCOME_NONZERO_EXIT:
      return notes;  // the program's output and traceback speak for themselves
    default:
      break;
  }
  std::string detail = response.message();
  if (response.outcome() == v1::OUTCOME_VIOLATION && !response.violation().empty()) {
    detail = absl::StrCat("forbidden system call ", response.violation(),
                          detail.empty() ? "" : "; ", detail);
  } else if (response.outcome() == v1::OUTCOME_SIGNALED && detail.empty()) {
    detail = absl::StrCat("killed by signal ", response.signal());
  }
  absl::StrAppend(&notes, "warden: ", OutcomeName(response.outcome()), detail.empty() ? "" : ": ",
                  detail, "\n");
  return notes;
}

std::string RenderSessionTable(const google::protobuf::RepeatedPtrField<v1::Session>& sessions) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "LANGUAGE", "STATE", "AGE", "IDLE", "MEMORY", "EXECUTIONS", "LABELS"}};
  for (const v1::Session& s : sessions) {
    rows.push_back({s.id(), absl::AsciiStrToLower(LanguageName(s.language())),
                    absl::AsciiStrToLower(SessionStateName(s.state())), FormatDuration(s.age_ms()),
                    FormatDuration(s.idle_ms()), FormatBytes(s.memory_bytes()),
                    absl::StrCat(s.execution_count()), LabelsText(s)});
  }
  return RenderTable(rows);
}

std::string RenderSessionDetails(const v1::Session& s) {
  const v1::Limits& limits = s.limits();
  std::vector<std::vector<std::string>> rows = {
      {"id:", s.id()},
      {"language:", absl::AsciiStrToLower(LanguageName(s.language()))},
      {"state:", absl::AsciiStrToLower(SessionStateName(s.state()))},
      {"created:", absl::FormatTime(absl::RFC3339_sec, absl::FromUnixMillis(s.created_unix_ms()),
                                    absl::UTCTimeZone())},
      {"expires:", absl::FormatTime(absl::RFC3339_sec, absl::FromUnixMillis(s.expires_unix_ms()),
                                    absl::UTCTimeZone())},
      {"age:", FormatDuration(s.age_ms())},
      {"idle:", FormatDuration(s.idle_ms())},
      {"memory:", FormatBytes(s.memory_bytes())},
      {"executions:", absl::StrCat(s.execution_count())},
      {"labels:", LabelsText(s)},
      {"limits:",
       absl::StrFormat("wall %dms, cpu %dms, memory %d MiB, output %s", limits.wall_ms(),
                       limits.cpu_ms(), limits.memory_mb(), FormatBytes(limits.output_bytes()))},
  };
  rows.push_back({"network:", NetworkText(s)});
  if (s.network_usage().connections() + s.network_usage().refused() > 0) {
    const v1::NetworkUsage& u = s.network_usage();
    rows.push_back({"network use:", absl::StrFormat("%d connections (%d open), %d refused; %s out, %s in",
                                                   u.connections(), u.open(), u.refused(), FormatBytes(u.bytes_out()),
                                                   FormatBytes(u.bytes_in()))});
  }
  if (s.ports().public_()) rows.push_back({"ports:", "public (no token needed)"});
  for (const v1::VolumeMount& m : s.volumes()) {
    rows.push_back({"volume:", absl::StrCat(m.volume(), " at ", m.path(), m.read_only() ? " (read-only)" : "")});
  }
  if (!s.lost_reason().empty()) rows.push_back({"lost reason:", s.lost_reason()});
  return RenderTable(rows);
}

std::string RenderFileTable(const google::protobuf::RepeatedPtrField<v1::FileInfo>& files) {
  std::vector<std::vector<std::string>> rows = {{"TYPE", "SIZE", "PATH"}};
  for (const v1::FileInfo& f : files) {
    bool directory = f.type() == "directory";
    rows.push_back({f.type(), directory ? "-" : absl::StrCat(f.size()),
                    directory ? absl::StrCat(f.path(), "/") : f.path()});
  }
  return RenderTable(rows);
}

}  // namespace warden::cli
