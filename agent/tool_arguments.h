// Tool-call arguments as models write them: JSON, or nearly. Small local
// models (and servers that constrain them with a grammar allowing any
// character in a string, as llama-cpp-python's does) put raw newlines and
// tabs inside string literals, which strict JSON forbids and Python's
// json.loads(strict=False) accepts. ParseToolArguments accepts them too.
#pragma once

#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace warden::agent {

// `text` with every control character (below 0x20) inside a JSON string
// literal written as its escape (\n, \t, \r, or \u00XX); the rest unchanged.
std::string EscapeControlCharactersInStrings(std::string_view text);

// The arguments as JSON: strictly, else with raw control characters inside
// strings escaped first. A discarded value (is_discarded()) when neither parses.
nlohmann::json ParseToolArguments(std::string_view text);

}  // namespace warden::agent
