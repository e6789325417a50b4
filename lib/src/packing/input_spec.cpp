// Command-line value parsing for pack: INPUT specs and SIZE values.
#include <cctype>
#include <system_error>

#include "ptepack/base/checked.h"
#include "ptepack/base/error.h"
#include "ptepack/packing/pack.h"

namespace ptepack {

InputSpec parse_input_spec(const std::string& text) {
  InputSpec spec;
  if (text.empty()) fail(ErrorCode::usage, "empty INPUT argument");
  std::error_code ec;
  if (std::filesystem::exists(text, ec)) {
    spec.path = text;
    return spec;
  }
  std::string rest = text;
  auto eq = rest.find('=');
  auto at_sign = rest.find('@');
  if (eq != std::string::npos && (at_sign == std::string::npos || eq < at_sign)) {
    spec.method = rest.substr(0, eq);
    rest = rest.substr(eq + 1);
  }
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
  return spec;
}

uint64_t parse_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0)
    fail(ErrorCode::usage, "invalid size {}: expected a number with an optional suffix",
         quote(text));
  uint64_t value = 0;
  for (size_t k = 0; k < i; ++k) {
    auto next = checked_mul(value, 10);
    if (next) next = checked_add(*next, static_cast<uint64_t>(text[k] - '0'));
    if (!next) fail(ErrorCode::usage, "invalid size {}: too large", quote(text));
    value = *next;
  }
  auto suffix = text.substr(i);
  uint64_t unit = 1;
  if (suffix.empty() || suffix == "B")
    unit = 1;
  else if (suffix == "K" || suffix == "KB")
    unit = 1000ULL;
  else if (suffix == "M" || suffix == "MB")
    unit = 1000ULL * 1000;
  else if (suffix == "G" || suffix == "GB")
    unit = 1000ULL * 1000 * 1000;
  else if (suffix == "KiB")
    unit = 1ULL << 10;
  else if (suffix == "MiB")
    unit = 1ULL << 20;
  else if (suffix == "GiB")
    unit = 1ULL << 30;
  else
    fail(ErrorCode::usage, "invalid size {}: unknown suffix (use K, M, G, KiB, MiB or GiB)",
         quote(text));
  auto bytes = checked_mul(value, unit);
  if (!bytes) fail(ErrorCode::usage, "invalid size {}: too large", quote(text));
  if (*bytes == 0) fail(ErrorCode::usage, "invalid size {}: must be positive", quote(text));
  return *bytes;
}

}  // namespace ptepack
