// JSON log lines for wardend's --log-format json: one object per line,
// {"time":..., "level":..., "msg":...}, with the message JSON-escaped (a
// pattern alone would let quotes or newlines in a message break the line).
#pragma once

#include <memory>

#include "spdlog/pattern_formatter.h"

namespace warden {

// A formatter for spdlog::logger::set_formatter.
std::unique_ptr<spdlog::formatter> JsonLogFormatter();

}  // namespace warden
