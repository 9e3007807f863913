#include "fronts/e2b/execution_lines.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"

namespace warden::e2b {
namespace {

using nlohmann::json;

// E2B's field for each MIME type it knows. Binary types are base64 on the
// wire (warden.v1 carries raw bytes); JSON types are parsed into the line.
enum class Kind { kText, kBinary, kJson };
struct Field {
  const char* mime;
  const char* name;
  Kind kind;
};
constexpr Field kFields[] = {
    {"text/plain", "text", Kind::kText},
    {"text/html", "html", Kind::kText},
    {"text/markdown", "markdown", Kind::kText},
    {"image/svg+xml", "svg", Kind::kText},
    {"image/png", "png", Kind::kBinary},
    {"image/jpeg", "jpeg", Kind::kBinary},
    {"application/pdf", "pdf", Kind::kBinary},
    {"text/latex", "latex", Kind::kText},
    {"application/json", "json", Kind::kJson},
    {"application/javascript", "javascript", Kind::kText},
    // The Python kernel's chart of a figure and a DataFrame's columns
    // (docs/api.md, "Results"), which E2B calls chart and data.
    {"application/vnd.warden.chart+json", "chart", Kind::kJson},
    {"application/vnd.warden.dataframe+json", "data", Kind::kJson},
};

// E2B's server shows a quoted repr without its quotes: 'abc' (Python) and
// 'abc' (JavaScript) are the text abc.
std::string Unquoted(const std::string& text) {
  if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"') && text.back() == text.front()) {
    return text.substr(1, text.size() - 2);
  }
  return text;
}

std::string Timestamp(absl::Time now) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", now, absl::UTCTimeZone());
}

}  // namespace

json ResultObject(const v1::Result& result, bool is_main_result) {
  json out = {{"type", "result"}, {"is_main_result", is_main_result}};
  json extra = json::object();
  for (const auto& [mime, data] : result.data()) {
    const Field* field = nullptr;
    for (const Field& f : kFields) {
      if (mime == f.mime) field = &f;
    }
    if (field == nullptr) {
      extra[mime] = data;
      continue;
    }
    switch (field->kind) {
      case Kind::kText:
        out[field->name] = mime == "text/plain" ? Unquoted(data) : data;
        break;
      case Kind::kBinary:
        out[field->name] = absl::Base64Escape(data);
        break;
      case Kind::kJson: {
        json parsed = json::parse(data, nullptr, /*allow_exceptions=*/false);
        out[field->name] = parsed.is_discarded() ? json(data) : parsed;
        break;
      }
    }
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
