// The one error type of the library, its stable exit codes, and helpers to raise it.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace ptepack {

// Process exit codes. These numbers are part of the CLI contract: never renumber.
enum class ErrorCode : int {
  verify_failed = 1,  // `verify` found problems in an artifact
  usage = 2,          // bad command line: options, input specs, output path
  invalid_input = 3,  // malformed file or a graph/data rule violated
  conflict = 4,       // inputs disagree with each other or with the options
  io = 5,             // reading or writing failed (missing file, disk full, ...)
  internal = 70,      // a bug in ptepack
};

// Messages are one line: "<file>: <what>", naming the key, method, member or offset.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  [[nodiscard]] ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_input(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(ErrorCode::invalid_input, fmt::format(format, std::forward<Args>(args)...));
}

// Quotes a key or name for messages so empty or odd names stay visible.
// (Not named `quoted`: ADL would pick std::quoted for std::string arguments.)
std::string quote(std::string_view text);
// The same escaping without the quotes: every name shown in text output goes
// through it, so a crafted key cannot forge lines or terminal controls. Control
// characters (C0, DEL, C1) and bytes outside well-formed UTF-8 become \xNN;
// valid UTF-8 text is kept as it is.
std::string escaped(std::string_view text);
// One line of text output: leading newlines (blank lines before a section)
// kept, everything else escaped, then a newline.
std::string text_line(std::string_view text);

}  // namespace ptepack
