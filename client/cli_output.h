// Renders what the daemon returned: JSON for --json (one object; bytes that
// are not UTF-8 are replaced, never an invalid document), and text for people
// (tables, rich results as their text/plain or a "[image/png, N bytes]" note).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_field.h"
#include "nlohmann/json.hpp"
#include "warden/v1/executor.pb.h"

namespace warden::cli {

// Enum names without their prefix: "OK", "PYTHON", "IDLE".
std::string OutcomeName(v1::Outcome outcome);
std::string LanguageName(v1::Language language);
std::string SessionStateName(v1::SessionState state);

// Whether a MIME type's data is raw bytes (base64 in JSON) rather than text.
bool IsBinaryMime(absl::string_view mime);

nlohmann::json ResultToJson(const v1::Result& result);
nlohmann::json ExecuteResponseToJson(const v1::ExecuteResponse& response);
nlohmann::json SessionToJson(const v1::Session& session);
nlohmann::json FileInfoToJson(const v1::FileInfo& file);

// Indented, newline-terminated; invalid UTF-8 becomes U+FFFD.
std::string DumpJson(const nlohmann::json& json);

// "950ms", "42s", "5m03s", "2h07m", "3d04h".
std::string FormatDuration(int64_t ms);
// "512 B", "12.0 KiB", "1.5 GiB".
std::string FormatBytes(int64_t bytes);

// A result as a terminal shows it: its text/plain, then a note for each
// binary type; a note for every type when there is no text/plain. Ends in a
// newline unless empty.
std::string RenderResultText(const v1::Result& result);
// The traceback, one entry a line; "Name: value" when there is none.
std::string RenderErrorText(const v1::Error& error);
// One "warden: ..." line per thing the outcome or truncation says that the
// program's own output does not (empty for OK, ERROR and NONZERO_EXIT).
std::string RenderOutcomeNotes(const v1::ExecuteResponse& response);

// Rows as columns padded to their widest cell, two spaces apart; the last
// column is not padded.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows);
std::string RenderSessionTable(const google::protobuf::RepeatedPtrField<v1::Session>& sessions);
std::string RenderSessionDetails(const v1::Session& session);
// A session's own network policy in one line ("allow a, b; deny c"), or
// what it has without one.
std::string NetworkText(const v1::Session& session);
std::string RenderFileTable(const google::protobuf::RepeatedPtrField<v1::FileInfo>& files);

}  // namespace warden::cli
