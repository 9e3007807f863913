// What the model is told about an execution: the outcome, stdout, stderr,
// the result's text, the error's name, value and traceback - capped at a
// configured size, keeping the head and the tail (where the error is) and
// saying how much was cut.
#pragma once

#include <string>

#include "warden/v1/executor.pb.h"

namespace warden::agent {

// "ok", "error", "wall_timeout", ...
std::string OutcomeName(v1::Outcome outcome);
// True when the code ran to the end without an error.
bool Succeeded(const v1::ExecuteResponse& response);
std::string FormatObservation(const v1::ExecuteResponse& response, size_t max_bytes);
// Cuts `text` to `max_bytes`, keeping its head and tail.
std::string Truncate(const std::string& text, size_t max_bytes);
// A short stable description of a failure ("ZeroDivisionError: division by
// zero"), to notice the same error twice; empty for a success.
std::string ErrorSignature(const v1::ExecuteResponse& response);

}  // namespace warden::agent
