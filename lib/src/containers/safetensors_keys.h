// The key rule every safetensors reader and writer applies.
#pragma once

#include <string>
#include <string_view>

#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "ptepack/base/limits.h"
#include "json/json_util.h"

namespace ptepack::safetensors::detail {

// A tensor key: non-empty, no NUL byte, valid UTF-8, at most Limits::max_key_length bytes.
inline void check_key(std::string_view key, const std::string& context) {
  if (key.empty()) fail_input("{}: empty tensor key", context);
  check_name(key, "tensor key", context);
  if (key.size() > Limits::max_key_length) {
    fail_input("{}: tensor key {} is longer than the limit of {} bytes", context, shown_key(key),
               Limits::max_key_length);
  }
}

}  // namespace ptepack::safetensors::detail
