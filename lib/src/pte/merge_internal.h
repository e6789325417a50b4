// What the two halves of the .pte merge share: method facts and key search.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hash/parallel_hash.h"
#include "pte/merge.h"
#include "ptepack/pte/pte.h"

namespace ptepack::pte::detail {

// Whether a plan has any instruction (one that has none only returns values).
[[nodiscard]] bool has_instructions(const Program& p, uint32_t plan);

// What a constant-only method returns, for "the same values in every input";
// nullopt when it returns something not compared (lists).
[[nodiscard]] std::optional<std::vector<std::string>> returned_values(const Program& p,
                                                                      uint32_t plan,
                                                                      const RangeDigests& digests);

// Which of `keys` occur in the bytes of `ranges` (delegates name their named
// data inside their blobs): one rolling hash per key length, hits confirmed.
[[nodiscard]] std::set<std::string> keys_found(const std::vector<ByteRange>& ranges,
                                               const std::set<std::string>& keys);

// Which of `keys` the delegates of plan `plan` name inside their blobs.
[[nodiscard]] std::set<std::string> keys_named_by_plan(const Program& p, uint32_t plan,
                                                       const std::set<std::string>& keys);

// One segment of the merged file: pieces relative to its start; its offset from the base.
struct MergePiece {
  uint64_t at = 0;
  ByteRange range;
};
struct MergeSegment {
  uint64_t size = 0;
  std::vector<MergePiece> pieces;
  uint64_t offset = 0;
};

// What one input's chosen plans become in the merged program.
struct MergeRemap {
  std::map<uint32_t, uint32_t> constant;         // data_buffer_idx of a stored constant -> merged
  std::map<uint32_t, uint32_t> state;            // data_buffer_idx of mutable state -> merged
  std::map<uint32_t, uint32_t> segment;          // delegate segment -> merged segment
  std::map<uint32_t, uint32_t> inline_data;      // backend_delegate_data index -> merged
  std::map<std::string, std::string> fqn;        // EXTERNAL key -> its merged name
  std::map<const void*, std::string> plan_name;  // ExecutionPlan table -> merged name
  std::map<uint32_t, std::string> plan_names;    // plan index -> merged name
  // --share-state: AllocationDetails table -> its offset in memory id 2, and
  // ExecutionPlan table -> its non_const_buffer_sizes with the arena appended.
  std::map<const void*, uint64_t> moved;
  std::map<const void*, std::vector<int64_t>> buffer_sizes;
  std::map<const void*, const TensorInfo*> tensor;  // Tensor table -> what it is
  std::map<const void*, const TensorInfo*> extra;   // ExtraTensorInfo table -> its tensor
};

// Everything the merged program holds and where, decided before a byte is written.
struct MergePlan {
  std::vector<MergeRemap> remaps;                  // per input
  std::vector<std::pair<size_t, uint32_t>> plans;  // (input, plan) in output order
  std::optional<uint32_t> version;                 // Program.version, when the first has one
  bool inline_field = false;   // an input has backend_delegate_data
  bool mutable_field = false;  // an input has mutable_data_segments
  uint64_t inline_alignment = 16;
  uint64_t tensor_alignment = 16;
  uint64_t segment_alignment = 128;
  std::vector<MergeSegment> segments;       // constants, state, delegate blobs, named data
  std::vector<uint64_t> constant_offsets;   // [0] is the reserved placeholder
  std::optional<uint32_t> state_segment;    // mutable_data_segments[0]'s segment
  std::vector<uint64_t> state_offsets;
  std::vector<ByteRange> inline_data;                        // backend_delegate_data
  std::vector<std::pair<std::string, uint32_t>> named_data;  // key, segment
  uint64_t data_size = 0;                                    // segment data, from the base
  uint64_t state_arena = 0;  // --share-state: bytes of memory id 2, in every method
};

// --share-state (docs/rename-rules.md, "Shared state"): every named mutable
// buffer of the chosen plans moves to memory id 2, one 16-aligned range per
// name in input then value order, with whatever a method keeps inside it; the
// arena's size is appended to every method's non_const_buffer_sizes. Refusals
// (exit 3): memory ids other than 1, non-CPU buffers, an unnamed initialised
// buffer, a value overlapping a buffer in part. One name with another dtype,
// shape or initial value in two methods is a conflict (exit 4).
// Returns the note that says what is shared.
[[nodiscard]] std::string plan_shared_state(MergePlan& plan,
                                            const std::vector<MergeInput>& inputs,
                                            const RangeDigests& digests);

// Without --share-state: a note for each buffer name two or more methods mutate.
[[nodiscard]] std::vector<std::string> shareable_state(const MergePlan& plan,
                                                       const std::vector<MergeInput>& inputs);

// The merged flatbuffer (each plan copied field for field, indices remapped)
// framed with its segments as the layout of a composed file.
[[nodiscard]] ComposedContent write_merge(const MergePlan& plan,
                                          const std::vector<MergeInput>& inputs);

}  // namespace ptepack::pte::detail
