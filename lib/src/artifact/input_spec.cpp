// INPUT arguments: `[METHOD=]PATH[@DATA[,DATA...]]`, parsed once for every command.
#include <system_error>

#include "ptepack/base/error.h"
#include "ptepack/artifact/artifact.h"

namespace ptepack {

namespace {

// `rest` as PATH[@DATA[,DATA...]] into `spec` (`text`: the whole argument, for messages).
void split_data(std::string rest, const std::string& text, InputSpec& spec) {
  auto at = rest.find('@');
  if (at != std::string::npos) {
    auto list = rest.substr(at + 1);
    rest = rest.substr(0, at);
    size_t start = 0;
    while (start <= list.size()) {
      auto comma = list.find(',', start);
      auto item =
          list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (item.empty()) fail(ErrorCode::usage, "{}: empty DATA path in INPUT argument", text);
      spec.data.emplace_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (rest.empty()) fail(ErrorCode::usage, "{}: INPUT argument has no PATH", text);
  spec.path = rest;
}

// `text` as [METHOD=]PATH[@DATA,...] when `method`, else PATH[@DATA,...]; a
// string naming an existing file or directory is always a plain PATH. `what`
// names the argument in the message for an empty one.
InputSpec parse_spec(const std::string& text, bool method, std::string_view what) {
  InputSpec spec;
  spec.text = text;
  if (text.empty()) fail(ErrorCode::usage, "empty {} argument", what);
  std::error_code ec;
  if (std::filesystem::exists(text, ec)) {
    spec.path = text;
    return spec;
  }
  std::string rest = text;
  auto eq = rest.find('=');
  auto at_sign = rest.find('@');
  if (method && eq != std::string::npos && (at_sign == std::string::npos || eq < at_sign)) {
    spec.method = rest.substr(0, eq);
    rest = rest.substr(eq + 1);
  }
  split_data(std::move(rest), text, spec);
  return spec;
}

}  // namespace

InputSpec parse_input_spec(const std::string& text) { return parse_spec(text, true, "INPUT"); }

InputSpec parse_artifact_spec(const std::string& text) { return parse_spec(text, false, "PATH"); }

}  // namespace ptepack
