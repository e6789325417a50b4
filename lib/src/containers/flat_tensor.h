// ExecuTorch FlatTensor (.ptd) files: the writer's layout plan and the validating reader.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ptepack/io/input_file.h"
#include "ptepack/tensors/dtype.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack::ptd {

// The FH01 extended header inserted at file offset 8, and the bytes it occupies
// (40 bytes of fields, zero padded to a multiple of 16 so the flatbuffer's
// internal alignment survives the insertion).
inline constexpr uint64_t extended_header_length = 40;
inline constexpr uint64_t extended_header_size = 48;
inline constexpr uint64_t default_alignment = 128;

// One NamedData: a key and the layout of the bytes of one segment.
struct Entry {
  std::string key;
  DType dtype = DType::BYTE;
  Shape shape;                          // written as int32 sizes (error if a dim does not fit)
  uint32_t segment = 0;                 // index into segment_sizes
  std::vector<uint8_t> dim_order = {};  // empty: 0..rank-1
  bool opaque = false;                  // no TensorLayout (delegate named data)
};

// Where everything of a planned .ptd goes. The caller writes `head` at offset 0,
// each segment's bytes at its offset, and zeros in between.
struct Layout {
  std::string head;  // file bytes [0, segment_base): flatbuffer (FT01) with the 48-byte FH01
                     // extended header inserted at offset 8, then zero padding
  uint64_t segment_base = 0;              // multiple of alignment
  uint64_t header_size = 0;               // head bytes before the zero padding (48 + flatbuffer)
  std::vector<uint64_t> segment_offsets;  // ABSOLUTE file offsets, each a multiple of alignment
  uint64_t file_size = 0;                 // end of last segment (no trailing padding)
};

// entries must be sorted by key (bytewise) and unique; every segment referenced.
// alignment: power of two >= 16 (default 128). Deterministic bytes.
// Broken preconditions throw ErrorCode::internal; data the format cannot hold
// (a dim above INT32_MAX, an over-long key, a header over Limits::max_header_bytes)
// throws ErrorCode::invalid_input.
Layout plan_file(const std::vector<Entry>& entries, const std::vector<uint64_t>& segment_sizes,
                 uint64_t alignment = default_alignment);

// plan_file's header_size and file_size (same checks, same errors) without the
// header bytes, reusing its buffers between calls: for sizing many files, as
// the shard planner sizes each new shard's first group (its candidates are
// sized by HeaderSizeModel below).
class FileSizer {
 public:
  struct Sizes {
    uint64_t header_size = 0;
    uint64_t file_size = 0;
  };
  [[nodiscard]] Sizes size(std::span<const Entry> entries,
                           const std::vector<uint64_t>& segment_sizes,
                           uint64_t alignment = default_alignment);

 private:
  flatbuffers::FlatBufferBuilder builder_;
  std::vector<uint64_t> relative_;
};

// plan_file's flatbuffer size, computed without building it. The size depends
// only on each entry's key length, rank and whether it is opaque (in key order)
// and on the number of segments, so this replays FlatBufferBuilder's arithmetic
// on those alone: padding, vtables and their deduplication, the root. Add the
// entries in key order, then flatbuffer_size(). Nothing is checked: refusing
// entries is plan_file's. Unit tests hold it to the builder on random files.
class HeaderSizeModel {
 public:
  void reset();
  void add(uint64_t key_length, uint64_t rank, bool opaque);
  // The size after the segments, the vectors and the root; the model must be
  // reset before its next use.
  [[nodiscard]] uint64_t flatbuffer_size(uint64_t segments);

 private:
  struct Vtable {
    uint16_t bytes;      // vtable size
    uint16_t object;     // table size
    uint16_t fields[3];  // offsets by field id (0: absent)
    bool operator==(const Vtable&) const = default;
  };
  void align(uint64_t alignment);
  void pre_align(uint64_t length, uint64_t alignment);
  uint64_t push(uint64_t scalar);  // aligned scalar; returns the size after it
  void string(uint64_t length);
  void vector(uint64_t count, uint64_t element);
  void start_table();
  void field(int id, uint64_t scalar);
  void end_table();

  uint64_t size_ = 0;
  uint64_t min_align_ = 1;
  uint64_t entries_ = 0;
  uint64_t table_start_ = 0;
  uint64_t field_at_[3] = {0, 0, 0};  // size after each field of the open table (0: absent)
  std::vector<Vtable> vtables_;       // written so far (a handful: they deduplicate)
};

// Upper bounds used by the shard planner so that a planned file never exceeds a size cap:
// for any call of plan_file, head size before padding (i.e. 48 + flatbuffer size) <=
// head_bound_fixed() + sum(head_bound_entry(key.size(), rank)) + segments * head_bound_segment().
uint64_t head_bound_fixed();
uint64_t head_bound_entry(uint64_t key_length, uint64_t rank, bool opaque = false);
uint64_t head_bound_segment();

struct Segment {
  uint64_t offset = 0;  // absolute file offset
  uint64_t size = 0;
};

struct File {
  std::string name;  // the file's name, for messages
  uint32_t version = 0;
  uint64_t segment_base = 0;
  std::vector<Segment> segments;
  TensorTable tensors;                 // key -> dtype/shape/ByteRange in `file`
  std::vector<uint32_t> segment_keys;  // per segment, how many keys it holds
};

// Reads and validates a .ptd: identifier FT01, FH01 header (length >= 40, offsets consistent with
// the file size), verifier, segments inside [segment_base, segment_base + segment_data_size) and
// the file, NamedData keys unique/non-empty/<= Limits::max_key_length, segment_index in range,
// layout scalar type one of ExecuTorch's, rank <= Limits::max_rank, dims >= 0, dim_order a
// permutation of the dimensions, layout byte size == segment size. A NamedData without
// tensor_layout is read as opaque bytes (BYTE, shape [segment size]). All errors:
// ErrorCode::invalid_input, "<file>: ..." naming the key or segment index.
File read_file(const InputFilePtr& file);

}  // namespace ptepack::ptd
