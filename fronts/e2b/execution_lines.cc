#include "fronts/e2b/execution_lines.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"

namespace warden::e2b {
namespace {

using nlohmann::json;

// E2B's field for each MIME type it knows. Binary types are base64 on the
// wire (warden.v1 carries raw bytes).
struct Field {
  const char* mime;
  const char* name;
  bool binary;
};
constexpr Field kFields[] = {
    {"text/plain", "text", false},       {"text/html", "html", false},
    {"text/markdown", "markdown", false}, {"image/svg+xml", "svg", false},
    {"image/png", "png", true},          {"image/jpeg", "jpeg", true},
    {"application/pdf", "pdf", true},    {"text/latex", "latex", false},
    {"application/javascript", "javascript", false},
};

std::string Timestamp(absl::Time now) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", now, absl::UTCTimeZone());
}

}  // namespace

json ResultObject(const v1::Result& result, bool is_main_result) {
  json out = {{"type", "result"}, {"is_main_result", is_main_result}};
  json extra = json::object();
  for (const auto& [mime, data] : result.data()) {
    bool known = false;
    for (const Field& field : kFields) {
      if (mime == field.mime) {
        out[field.name] = field.binary ? absl::Base64Escape(data) : data;
        known = true;
      }
    }
    if (mime == "application/json") {
      json parsed = json::parse(data, nullptr, /*allow_exceptions=*/false);
      out["json"] = parsed.is_discarded() ? json(data) : parsed;
      known = true;
    }
    if (!known) extra[mime] = data;
  }
  if (!extra.empty()) out["extra"] = extra;
  return out;
}

std::vector<json> ExecutionLines(const v1::ExecuteEvent& event, absl::Time now) {
  switch (event.event_case()) {
    case v1::ExecuteEvent::kStdout:
      return {{{"type", "stdout"}, {"text", event.stdout()}, {"timestamp", Timestamp(now)}}};
    case v1::ExecuteEvent::kStderr:
      return {{{"type", "stderr"}, {"text", event.stderr()}, {"timestamp", Timestamp(now)}}};
    case v1::ExecuteEvent::kDisplay:
      return {ResultObject(event.display(), false)};
    case v1::ExecuteEvent::kResult:
      return {ResultObject(event.result(), true)};
    case v1::ExecuteEvent::kError:
      return {{{"type", "error"},
               {"name", event.error().name()},
               {"value", event.error().value()},
               {"traceback", absl::StrJoin(event.error().traceback(), "\n")}}};
    case v1::ExecuteEvent::kSummary: {
      const v1::ExecuteResponse& summary = event.summary();
      std::vector<json> lines;
      // A cell the user's code did not end itself: say so as an error, the
      // way E2B reports a timeout or a dead kernel.
      const v1::Outcome o = summary.outcome();
      if (!summary.has_error() && o != v1::OUTCOME_OK && o != v1::OUTCOME_ERROR) {
        lines.push_back({{"type", "error"},
                         {"name", v1::Outcome_Name(o).substr(8)},  // without "OUTCOME_"
                         {"value", summary.message()},
                         {"traceback", ""}});
      }
      lines.push_back({{"type", "number_of_executions"}, {"execution_count", summary.execution_count()}});
      lines.push_back({{"type", "end_of_execution"}});
      return lines;
    }
    case v1::ExecuteEvent::EVENT_NOT_SET:
      break;
  }
  return {};
}

std::string Line(const json& object) {
  return object.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace warden::e2b
