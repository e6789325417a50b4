// What the .ptd layout planner and reader share: the identifier, the header magic,
// and the bytes before the inserted header (docs/format-ptd.md).
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <string_view>

#include "ptepack/base/limits.h"

namespace ptepack::ptd::detail {

inline constexpr std::string_view kIdentifier = "FT01";
inline constexpr std::string_view kHeaderMagic = "FH01";
// Root offset and file identifier: the bytes before the inserted header.
inline constexpr uint64_t kPrefixSize = 8;

static_assert(Limits::max_header_bytes < FLATBUFFERS_MAX_BUFFER_SIZE,
              "a .ptd flatbuffer within the limit must be verifiable");

}  // namespace ptepack::ptd::detail
