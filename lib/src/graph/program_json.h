// The JSON form of a program, read in one streaming pass into FlatBuffers bytes.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <string>
#include <string_view>

namespace ptepack {

// The flatc JSON form of a Program (docs/format-ptg.md lists the accepted language) as an
// unverified .ptg buffer, for read_program_binary. Errors: invalid_input
// "<context>: invalid JSON program: line L, column C: ...".
[[nodiscard]] flatbuffers::DetachedBuffer program_json_to_binary(std::string_view text,
                                                                 const std::string& context);

}  // namespace ptepack
