// Strict JSON parsing for untrusted files: duplicate keys and deep nesting rejected.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ptepack {

// Parses `text`; throws invalid_input "<context>: ..." on a syntax error (with
// the byte position), a duplicate key in any object, or nesting deeper than
// Limits::max_json_depth.
[[nodiscard]] nlohmann::json parse_json_strict(std::string_view text, const std::string& context);

}  // namespace ptepack
