// Program graph (.ptg FlatBuffers and its flatc JSON form): read, validate encoding, write.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ptepack/schema/program_generated.h"

namespace ptepack {

namespace nb = native_backend;
using ProgramPtr = std::unique_ptr<nb::ProgramT>;

// Verifies (FlatBuffers verifier with explicit depth/table limits, identifier
// NPTG) before any access, unpacks, then rejects enum values and union tags the
// schema does not define. Errors: invalid_input "<context>: ...".
[[nodiscard]] ProgramPtr read_program_binary(std::span<const uint8_t> bytes,
                                             const std::string& context);
// The JSON form flatc prints and accepts (`flatc --json`, strict or not), read in one
// streaming pass into a flatbuffer against the built-in schema, then read as binary.
[[nodiscard]] ProgramPtr read_program_json(std::string_view text, const std::string& context);
// A .ptg or .json file, told apart by content (identifier or leading '{').
// `file_bytes`, when given, receives the file's size.
[[nodiscard]] ProgramPtr read_program_file(const std::filesystem::path& path,
                                           uint64_t* file_bytes = nullptr);

// Deterministic .ptg bytes (identifier NPTG): equal programs give equal bytes.
// `size_hint`, the expected size, only sizes the first buffer.
[[nodiscard]] std::string write_program_binary(const nb::ProgramT& program,
                                               size_t size_hint = 1024);
// The same bytes from a program no longer needed, left in the builder's memory
// (no copy). Each method, node, value and constant is freed once encoded, so
// the program and its bytes are not held whole at the same time.
[[nodiscard]] flatbuffers::DetachedBuffer write_program_buffer(ProgramPtr program,
                                                               size_t size_hint);
// flatc-style strict JSON text of a program (used by dump --json --graph and tests).
[[nodiscard]] std::string program_to_json(const nb::ProgramT& program);

// True when the first bytes look like a .ptg (identifier at offset 4).
[[nodiscard]] bool looks_like_program_binary(std::span<const uint8_t> head);

}  // namespace ptepack
