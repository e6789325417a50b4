// Strict JSON parsing for untrusted files, and the message helpers JSON readers share.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ptepack {

// Parses `text` into a DOM; throws invalid_input "<context>: ..." on a syntax
// error (with the byte offset), a duplicate key in any object (nlohmann would
// keep the last silently), or nesting deeper than Limits::max_json_depth.
// Linear time: the DOM is built from SAX events, never searched.
[[nodiscard]] nlohmann::json parse_json_strict(std::string_view text, const std::string& context);

// A key quoted for a message, cut after 200 bytes (keys can be megabytes long).
[[nodiscard]] std::string shown_key(std::string_view key);

// Throws invalid_input for a nlohmann parse error at SAX `position` (bytes
// read), reported as offset base + position - 1, without echoing the input.
[[noreturn]] void fail_json_syntax(const std::string& context, uint64_t base, size_t position,
                                   const std::string& what);

// Pretty JSON text (2-space indent, final newline) for every document ptepack
// prints or writes. Objects are nlohmann::json (std::map): keys come out
// sorted, and building large maps stays O(n log n). Strings that are not
// UTF-8 are written with U+FFFD instead of throwing.
[[nodiscard]] std::string json_text(const nlohmann::json& value);

}  // namespace ptepack
