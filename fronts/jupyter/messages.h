// Building the Jupyter messages a kernel sends (kernel_info_reply, status,
// stream, display_data, execute_result, error, execute_reply, ...) from
// warden.v1 results, with headers that name the kernel's session.
#pragma once

#include <string>

#include "fronts/jupyter/wire.h"
#include "nlohmann/json.hpp"
#include "warden/v1/executor.pb.h"

namespace warden::jupyter {

// A random UUID (version 4), for msg_id and kernel session ids.
std::string NewUuid();

// A message from the kernel whose session id is `kernel_session`, in reply
// to (or caused by) `parent`.
Message MakeMessage(const std::string& channel, const std::string& msg_type, nlohmann::json content,
                    const nlohmann::json& parent_header, const std::string& kernel_session);

// A warden.v1 MIME bundle as Jupyter's `data`: text types as strings,
// application/json (and +json) parsed, binary types (PNG, JPEG, PDF) base64.
nlohmann::json MimeBundle(const v1::Result& result);

// error content {ename, evalue, traceback} for what ended a cell without an
// exception of its own: a limit, an interrupt, a lost interpreter.
nlohmann::json ErrorForOutcome(const v1::ExecuteResponse& summary);
// The same for Warden refusing the request (e.g. the kernel is gone).
nlohmann::json ErrorForStatus(const std::string& message);
nlohmann::json ErrorContent(const v1::Error& error);

}  // namespace warden::jupyter
