// Program graph (.ptg FlatBuffers and its flatc JSON form): read, validate encoding, write.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ptepack/schema/program_generated.h"

namespace ptepack {

namespace nb = native_backend;
using ProgramPtr = std::unique_ptr<nb::ProgramT>;

// A program flatbuffer that passed every check a reader makes: the FlatBuffers
// verifier (explicit depth and table limits, identifier NPTG), 8-byte lists
// aligned, enum values and union tags the schema defines, every union tag
// with its member, subgraphs at most Limits::max_graph_depth deep, every
// string UTF-8 without NUL. Its tables are then read in place (dump, verify,
// diff: a tree would take several times the buffer's memory) or unpacked
// into an object tree (pack). Moving it keeps root() valid.
class ProgramBuffer {
 public:
  ProgramBuffer() = default;
  ProgramBuffer(ProgramBuffer&& other) noexcept
      : storage_(std::move(other.storage_)), root_(std::exchange(other.root_, nullptr)) {}
  ProgramBuffer& operator=(ProgramBuffer&& other) noexcept {
    if (this != &other) {
      storage_ = std::move(other.storage_);
      root_ = std::exchange(other.root_, nullptr);
    }
    return *this;
  }
  ProgramBuffer(const ProgramBuffer&) = delete;
  ProgramBuffer& operator=(const ProgramBuffer&) = delete;
  ~ProgramBuffer() = default;
  [[nodiscard]] explicit operator bool() const { return root_ != nullptr; }
  [[nodiscard]] const nb::Program& root() const { return *root_; }
  [[nodiscard]] size_t size() const;

 private:
  friend class ProgramBufferAccess;
  std::variant<std::vector<uint8_t>, flatbuffers::DetachedBuffer> storage_;
  const nb::Program* root_ = nullptr;
};

// Checks `bytes` as above and keeps them. Errors: invalid_input "<context>: ...".
[[nodiscard]] ProgramBuffer read_program_buffer(std::vector<uint8_t> bytes,
                                                const std::string& context);
// The JSON form flatc prints and accepts (`flatc --json`, strict or not), read in one
// streaming pass into a flatbuffer against the built-in schema, then checked as binary.
[[nodiscard]] ProgramBuffer read_program_json_buffer(std::string_view text,
                                                     const std::string& context);
// A .ptg or .json file, told apart by content (identifier or leading '{').
// `file_bytes`, when given, receives the file's size.
[[nodiscard]] ProgramBuffer read_program_file_buffer(const std::filesystem::path& path,
                                                     uint64_t* file_bytes = nullptr);
// The object tree of a checked buffer, which is freed. One program is unpacked
// at a time in a process (the unpack holds buffer and growing tree at once).
[[nodiscard]] ProgramPtr unpack_program(ProgramBuffer buffer);
// The same, the buffer kept (a reader that still checks it).
[[nodiscard]] ProgramPtr unpack_program_kept(const ProgramBuffer& buffer);

// The same readers returning the object tree.
[[nodiscard]] ProgramPtr read_program_binary(std::span<const uint8_t> bytes,
                                             const std::string& context);
[[nodiscard]] ProgramPtr read_program_json(std::string_view text, const std::string& context);
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
// flatc-style strict JSON text of a program (tests and the fuzz targets' round trip).
[[nodiscard]] std::string program_to_json(const nb::ProgramT& program);

// True when the first bytes look like a .ptg (identifier at offset 4).
[[nodiscard]] bool looks_like_program_binary(std::span<const uint8_t> head);

}  // namespace ptepack
