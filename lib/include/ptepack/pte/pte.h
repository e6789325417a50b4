// ExecuTorch programs (.pte): the validating reader, and the rewriter that
// moves tensor bytes out of (or back into) a program.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ptepack/io/input_file.h"
#include "ptepack/tensors/tensor.h"

namespace executorch_flatbuffer {
struct Program;
struct Tensor;
}  // namespace executorch_flatbuffer

namespace ptepack::pte {

// The flatbuffer region of a program is held in memory; the format caps it at 2 GiB.
inline constexpr uint64_t max_flatbuffer_bytes = (1ULL << 31) - 1;
inline constexpr uint64_t header_length = 32;  // eh00 fields as ExecuTorch writes them

// The optional `eh00` extended header at offset 8.
struct Header {
  bool present = false;
  uint32_t length = 0;
  uint64_t program_size = 0;  // the flatbuffer region [0, program_size), header included
  uint64_t segment_base = 0;  // 0: no segment data
  uint64_t segment_data_size = 0;
};

struct Segment {
  uint64_t offset = 0;  // absolute file offset
  uint64_t size = 0;
};

// Where a Tensor value's bytes live (docs/format-pte.md, "How the runtime
// classifies a Tensor value").
enum class Storage : uint8_t {
  none,              // planned memory or a runtime input: no stored bytes
  constant_segment,  // constant_segment.offsets[data_buffer_idx]
  constant_buffer,   // deprecated inline Program.constant_buffer[data_buffer_idx]
  external,          // EXTERNAL: a .ptd supplies it under fully_qualified_name
  mutable_state,     // planned memory with an initial value in mutable_data_segments
};
[[nodiscard]] std::string_view storage_name(Storage storage);

// A Tensor value of one execution plan.
struct TensorInfo {
  uint32_t plan = 0;
  uint32_t value = 0;
  int scalar_type = 0;     // as stored
  bool known_type = true;  // scalar_type is one of ExecuTorch's
  DType dtype = DType::BYTE;
  Shape shape;
  std::vector<uint8_t> dim_order;  // as stored (may be the identity)
  Storage storage = Storage::none;
  uint32_t buffer_index = 0;  // data_buffer_idx
  std::string fqn;            // extra_tensor_info.fully_qualified_name, or empty
  bool planned = false;       // has allocation_info
  uint64_t nbytes = 0;        // element count x element size
  ByteRange bytes;            // constant_segment, constant_buffer, mutable_state: in the file
  const executorch_flatbuffer::Tensor* table = nullptr;  // inside Program::flatbuffer
};

struct NamedEntry {
  std::string key;
  uint32_t segment = 0;
  ByteRange bytes;
};

struct Delegate {
  uint32_t plan = 0;
  std::string id;
  bool inline_data = false;  // backend_delegate_data (else a segment)
  uint32_t index = 0;
  uint64_t size = 0;
  ByteRange bytes;  // the processed blob in the file, inline or in its segment
};

struct Program {
  InputFilePtr file;
  std::vector<uint8_t> flatbuffer;  // file bytes [0, program_size)
  Header header;
  std::vector<Segment> segments;
  std::vector<std::string> plans;  // execution plan names, in order
  std::vector<TensorInfo> tensors;
  std::vector<NamedEntry> named_data;
  std::vector<Delegate> delegates;
  uint64_t segment_alignment = 1;  // largest power of two every segment start keeps (<= 64 KiB)
  uint64_t inline_alignment = 16;  // of inline constant and delegate data (16..4096)
  uint64_t tensor_alignment = 16;  // of offsets in the constant segment (16..4096)
  // Why rewriting would lose something (fields beyond the schema, unknown
  // union tags or enum values); empty when the program can be rewritten.
  std::vector<std::string> not_rewritable;

  [[nodiscard]] const executorch_flatbuffer::Program* root() const;
};

// True when the first bytes carry the ET12 identifier at offset 4.
[[nodiscard]] bool looks_like_pte(std::span<const uint8_t> head);

// Reads and validates a .pte: header sizes against the file, the flatbuffer
// verified with explicit limits before any access, segments inside the file and
// not overlapping, every index (segments, constant offsets, delegate data,
// mutable data, named data, values, operators, instructions) in range, stored
// constants' byte length from element count x element size inside their
// segment. Errors: invalid_input "<file>: <field>: ...".
[[nodiscard]] Program read(const InputFilePtr& file);

}  // namespace ptepack::pte

namespace ptepack::pte {

// What a rewrite does with one Tensor value (parallel to Program::tensors).
struct TensorEdit {
  enum class Kind : uint8_t {
    keep,      // unchanged (mutable state, planned memory, EXTERNAL left as it is)
    external,  // becomes EXTERNAL under `key`; its bytes leave the program
    constant,  // stored in the rebuilt constant segment as buffer `buffer`
  };
  Kind kind = Kind::keep;
  std::string key;
  uint32_t buffer = 0;  // index into Rewrite::constants
};

struct Rewrite {
  std::vector<TensorEdit> tensors;
  std::vector<ByteRange> constants;  // the rebuilt constant segment, buffer by buffer
  // The output's named_data, in order; the field is omitted when empty. Equal
  // ranges share one segment.
  std::vector<std::pair<std::string, ByteRange>> named_data;
  uint64_t alignment = 128;  // segment alignment; the input's own is never lowered
  // Offset alignment of the rebuilt constant segment; 0: the input's (Program::tensor_alignment).
  uint64_t constant_alignment = 0;
};

// The rewritten file: `head` at offset 0 (flatbuffer with its eh00 header, zero
// padded to the segment base), then each piece's bytes at its offset, zeros between.
struct Layout {
  std::string head;
  std::vector<std::pair<uint64_t, ByteRange>> pieces;  // absolute offset, ascending
  uint64_t file_size = 0;
};

// Rewrites a program read by read(), keeping every field and its presence
// except what the rules change (docs/format-pte.md, "Rules for a rewritten
// program"). Refuses (invalid_input) a program with not_rewritable reasons.
[[nodiscard]] Layout rewrite(const Program& program, const Rewrite& rewrite);

}  // namespace ptepack::pte

namespace ptepack {

// A .pte program of an artifact.
struct ProgramFile {
  std::string file;  // file name (the name it keeps in an output directory)
  pte::Program program;
  // Directory of programs: the keys the manifest lists as the program's named
  // data (in program order). Null for a .pte given directly: there every key of
  // its data files belongs to it.
  std::optional<std::vector<std::string>> named_keys;
};

}  // namespace ptepack
