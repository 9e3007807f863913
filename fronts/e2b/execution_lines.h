// The code interpreter's /execute stream: warden.v1 ExecuteEvents as the
// newline-delimited JSON objects E2B's code-interpreter server sends, one
// object a line, exactly as its SDKs parse them:
//   {"type":"stdout"|"stderr","text":...,"timestamp":...}
//   {"type":"result","text":...,"png":...,...,"is_main_result":bool}
//   {"type":"error","name":...,"value":...,"traceback":"..."}
//   {"type":"number_of_executions","execution_count":N}
//   {"type":"end_of_execution"}
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "warden/v1/executor.pb.h"

namespace warden::e2b {

// A MIME bundle as an E2B result: text/plain -> "text", image/png -> "png"
// (base64), application/json -> "json" (parsed), ...; types E2B has no
// field for go under "extra".
nlohmann::json ResultObject(const v1::Result& result, bool is_main_result);

// The lines for one event (each without its newline). A summary becomes
// number_of_executions, preceded by an error line when the cell was stopped
// by a limit or lost its interpreter (so the SDK reports an ExecutionError),
// and followed by end_of_execution.
std::vector<nlohmann::json> ExecutionLines(const v1::ExecuteEvent& event, absl::Time now);

// json.dump for the wire: invalid UTF-8 from programs is replaced, not thrown on.
std::string Line(const nlohmann::json& object);

}  // namespace warden::e2b
