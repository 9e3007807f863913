#include "agent/observation.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace warden::agent {
namespace {

// Tracebacks may carry terminal colours (ESC [ ... m).
std::string StripAnsi(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= '@' && text[i] <= '~')) ++i;
      continue;
    }
    out += text[i];
  }
  return out;
}

void Section(std::string* out, const char* name, const std::string& text) {
  if (text.empty()) return;
  absl::StrAppend(out, name, ":\n", text);
  if (text.back() != '\n') out->push_back('\n');
}

}  // namespace

std::string OutcomeName(v1::Outcome outcome) {
  return absl::AsciiStrToLower(absl::StripPrefix(v1::Outcome_Name(outcome), "OUTCOME_"));
}

bool Succeeded(const v1::ExecuteResponse& r) { return r.outcome() == v1::OUTCOME_OK; }

std::string Truncate(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  const size_t head = max_bytes * 2 / 5, tail = max_bytes - head;
  return absl::StrCat(text.substr(0, head), "\n[... ", text.size() - head - tail,
                      " bytes truncated ...]\n", text.substr(text.size() - tail));
}

std::string FormatObservation(const v1::ExecuteResponse& r, size_t max_bytes) {
  std::string out = absl::StrCat("outcome: ", OutcomeName(r.outcome()), "\n");
  Section(&out, "stdout", r.stdout());
  if (r.stdout_truncated()) out += "(stdout was cut at the cell's output limit)\n";
  Section(&out, "stderr", r.stderr());
  if (r.stderr_truncated()) out += "(stderr was cut at the cell's output limit)\n";
  for (const v1::Result& result : r.results()) {
    auto text = result.data().find("text/plain");
    if (result.is_result() && text != result.data().end()) {
      Section(&out, "result", text->second);
    } else {
      std::vector<std::string> types;
      for (const auto& [mime, data] : result.data()) types.push_back(mime);
      absl::StrAppend(&out, "display: ", absl::StrJoin(types, ", "), "\n");
    }
  }
  if (!r.error().name().empty()) {
    absl::StrAppend(&out, "error: ", r.error().name(), ": ", r.error().value(), "\n");
    Section(&out, "traceback", StripAnsi(absl::StrJoin(r.error().traceback(), "\n")));
  }
  if (!r.message().empty()) absl::StrAppend(&out, "message: ", r.message(), "\n");
  return Truncate(out, max_bytes);
}

std::string ErrorSignature(const v1::ExecuteResponse& r) {
  if (Succeeded(r)) return "";
  if (!r.error().name().empty()) return absl::StrCat(r.error().name(), ": ", r.error().value());
  std::string tail(absl::StripAsciiWhitespace(r.stderr()));
  if (size_t nl = tail.rfind('\n'); nl != std::string::npos) tail = tail.substr(nl + 1);
  return absl::StrCat(OutcomeName(r.outcome()), ": ", tail.substr(0, 200));
}

}  // namespace warden::agent
