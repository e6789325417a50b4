// Schema slots the .pte writers edit, and the framing of a written program (eh00 header, base).
#pragma once

#include <cstdint>
#include <string>

namespace ptepack::pte::detail {

// Field slots (declaration positions, docs/format-pte.md) of the tables the writers edit.
enum ProgramSlot : uint16_t {
  kVersion = 0,
  kExecutionPlan = 1,
  kConstantBuffer = 2,
  kBackendDelegateData = 3,
  kSegments = 4,
  kConstantSegment = 5,
  kMutableDataSegments = 6,
  kNamedData = 7,
};
enum PlanSlot : uint16_t { kPlanName = 0, kNonConstBufferSizes = 8 };
enum AllocationSlot : uint16_t { kMemoryId = 0, kMemoryOffsetLow = 1, kMemoryOffsetHigh = 2 };
enum TensorSlot : uint16_t { kDataBufferIdx = 5, kExtraTensorInfo = 9 };
enum ExtraSlot : uint16_t { kFullyQualifiedName = 1, kLocation = 2 };
enum DataReferenceSlot : uint16_t { kReferenceIndex = 1 };

inline constexpr uint64_t kMaxSegmentAlignment = 65536;

// `value` rounded up to a multiple of `alignment`; invalid_input on overflow.
[[nodiscard]] uint64_t aligned(uint64_t value, uint64_t alignment);

// A finished flatbuffer framed as a .pte file head. With segment data, the eh00
// header is inserted after the root offset and identifier, padded to
// max(32, inline_alignment) so every inline alignment holds and only the root
// offset moves; the head is zero padded to `base`, the first multiple of
// `segment_alignment` after it. Without segment data it is the flatbuffer alone
// (ExecuTorch writes no header then) and `base` is 0.
struct Framed {
  std::string head;
  uint64_t base = 0;
};
[[nodiscard]] Framed frame(const uint8_t* buffer, uint64_t size, uint64_t inline_alignment,
                           uint64_t segment_alignment, uint64_t data_size);

}  // namespace ptepack::pte::detail
