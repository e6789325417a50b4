// ExecuTorch FlatTensor (.ptd): byte layout planning for the writer, to the byte.
#include <fmt/ranges.h>

#include <array>
#include <limits>
#include <string_view>

#include "containers/ptd_format.h"
#include "base/byte_reader.h"
#include "base/checked.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "containers/flat_tensor.h"
#include "ptepack/schema/flat_tensor_generated.h"

namespace ptepack::ptd {
namespace {

namespace fbs = flat_tensor_flatbuffer;
using executorch_flatbuffer::ScalarType;
using namespace detail;  // the shared format constants


// Per-object byte counts of what FlatBufferBuilder emits for this schema with
// ForceDefaults (every field present). Every string, vector and 4-byte-field table
// ends 4-aligned; strings and byte vectors are a 4-byte length + payload padded to 4.
constexpr uint64_t kTableSize = 16;   // TensorLayout, NamedData, FlatTensor: soffset + 3 fields
constexpr uint64_t kVtableCost = 12;  // 3-field vtable (10 bytes) + re-alignment of what follows
// DataSegment: padding to 8 (<= 4; up to 6 before the first) + 20 + its vector slot.
constexpr uint64_t kSegmentCost = 28;
// Vtables are deduplicated, but the table object size is part of a vtable, so a table that
// starts right after a 10-byte vtable (2 bytes of padding inside it) gets its own. Fixed part:
// the header; identifier, root offset and up to 7 bytes aligning the buffer to 8; the root
// table; the two vectors' length words; one TensorLayout, two NamedData and one root vtable;
// four DataSegment vtables (8 bytes; one per padding 0/2/4/6 before the 8-aligned fields).
// Opaque entries (no layout) add one more NamedData vtable variant.
constexpr uint64_t kFixedCost =
    extended_header_size + 8 + 7 + kTableSize + 8 + 5 * kVtableCost + 4 * 8;

uint64_t align4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }

void check_entries(std::span<const Entry> entries, const std::vector<uint64_t>& segment_sizes) {
  if (segment_sizes.size() > Limits::max_keys || entries.size() > Limits::max_keys) {
    fail_input(".ptd: {} keys and {} segments exceed the limit of {}", entries.size(),
               segment_sizes.size(), Limits::max_keys);
  }
  std::vector<bool> referenced(segment_sizes.size(), false);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (i > 0 && !(entries[i - 1].key < e.key)) {
      fail(ErrorCode::internal, ".ptd plan: keys not sorted and unique: {} then {}",
           quote(entries[i - 1].key), quote(e.key));
    }
    if (e.key.empty() || e.key.size() > Limits::max_key_length ||
        e.key.find('\0') != std::string::npos) {
      fail_input(".ptd: key {} must be 1 to {} bytes without NUL", quote(e.key),
                 Limits::max_key_length);
    }
    if (e.segment >= segment_sizes.size()) {
      fail(ErrorCode::internal, ".ptd plan: key {}: segment {} out of range ({} segments)",
           quote(e.key), e.segment, segment_sizes.size());
    }
    referenced[e.segment] = true;
    if (e.shape.size() > Limits::max_rank) {
      fail_input(".ptd: key {}: rank {} exceeds the limit {}", quote(e.key),
                 e.shape.size(), Limits::max_rank);
    }
    for (size_t d = 0; d < e.shape.size(); ++d) {
      if (e.shape[d] < 0 || e.shape[d] > std::numeric_limits<int32_t>::max()) {
        fail_input(".ptd: key {}: dim {} = {} does not fit the int32 sizes of a .ptd",
                   quote(e.key), d, e.shape[d]);
      }
    }
    if (!e.dim_order.empty() && e.dim_order.size() != e.shape.size()) {
      fail(ErrorCode::internal, ".ptd plan: key {}: dim_order of {} for rank {}",
           quote(e.key), e.dim_order.size(), e.shape.size());
    }
    auto bytes =
        e.opaque ? std::optional<uint64_t>(segment_sizes[e.segment]) : byte_size(e.dtype, e.shape);
    if (!bytes || *bytes != segment_sizes[e.segment]) {
      fail(ErrorCode::internal, ".ptd plan: key {}: layout needs {} bytes, segment {} has {}",
           quote(e.key), bytes.value_or(0), e.segment, segment_sizes[e.segment]);
    }
  }
  for (size_t s = 0; s < referenced.size(); ++s) {
    if (!referenced[s]) fail(ErrorCode::internal, ".ptd plan: segment {} is not referenced", s);
  }
}

// The flatbuffer, before the extended header is inserted. Object order is fixed
// (entries in order, then segments, then the vectors and root) so bytes are deterministic.
void build_flatbuffer(flatbuffers::FlatBufferBuilder& builder, std::span<const Entry> entries,
                      const std::vector<uint64_t>& segment_sizes,
                      const std::vector<uint64_t>& relative_offsets) {
  builder.ForceDefaults(true);
  std::vector<flatbuffers::Offset<fbs::NamedData>> named;
  named.reserve(entries.size());
  std::vector<int32_t> sizes;
  std::vector<uint8_t> dim_order;
  for (const Entry& e : entries) {
    auto key = builder.CreateString(e.key);
    if (e.opaque) {
      named.push_back(fbs::CreateNamedData(builder, key, e.segment));
      continue;
    }
    sizes.clear();
    dim_order.clear();
    for (size_t d = 0; d < e.shape.size(); ++d) {
      sizes.push_back(static_cast<int32_t>(e.shape[d]));
      dim_order.push_back(e.dim_order.empty() ? static_cast<uint8_t>(d) : e.dim_order[d]);
    }
    auto sizes_offset = builder.CreateVector(sizes);
    auto dim_order_offset = builder.CreateVector(dim_order);
    auto layout = fbs::CreateTensorLayout(
        builder, static_cast<ScalarType>(ptd_scalar_type(e.dtype)), sizes_offset, dim_order_offset);
    named.push_back(fbs::CreateNamedData(builder, key, e.segment, layout));
  }
  std::vector<flatbuffers::Offset<fbs::DataSegment>> segments;
  segments.reserve(segment_sizes.size());
  for (size_t s = 0; s < segment_sizes.size(); ++s) {
    segments.push_back(fbs::CreateDataSegment(builder, relative_offsets[s], segment_sizes[s]));
  }
  auto segments_offset = builder.CreateVector(segments);
  auto named_offset = builder.CreateVector(named);
  auto root = fbs::CreateFlatTensor(builder, /*version=*/0, segments_offset, named_offset);
  fbs::FinishFlatTensorBuffer(builder, root);
}

}  // namespace

uint64_t head_bound_fixed() { return kFixedCost; }

uint64_t head_bound_entry(uint64_t key_length, uint64_t rank, bool opaque) {
  // key string, NamedData, named_data slot (and, with a layout, sizes [int32],
  // dim_order [uint8] and the TensorLayout)
  if (opaque) return (4 + align4(key_length + 1)) + kTableSize + 4;
  return (4 + align4(key_length + 1)) + (4 + 4 * rank) + (4 + align4(rank)) + 2 * kTableSize + 4;
}

uint64_t head_bound_segment() { return kSegmentCost; }

// FlatBufferBuilder (flatbuffers 2.x) step for step, sizes only: it grows
// downwards, so padding depends on the size so far; each table ends with its
// vtable offset and a vtable unless an identical one was written before.
void HeaderSizeModel::reset() {
  size_ = 0;
  min_align_ = 1;
  entries_ = 0;
  vtables_.clear();
}

inline void HeaderSizeModel::align(uint64_t alignment) {
  min_align_ = std::max(min_align_, alignment);
  size_ += (~size_ + 1) & (alignment - 1);
}

inline void HeaderSizeModel::pre_align(uint64_t length, uint64_t alignment) {
  if (length == 0) return;
  min_align_ = std::max(min_align_, alignment);
  size_ += (~(size_ + length) + 1) & (alignment - 1);
}

inline uint64_t HeaderSizeModel::push(uint64_t scalar) {
  align(scalar);
  size_ += scalar;
  return size_;
}

inline void HeaderSizeModel::string(uint64_t length) {
  pre_align(length + 1, 4);
  size_ += length + 1;
  push(4);
}

inline void HeaderSizeModel::vector(uint64_t count, uint64_t element) {
  pre_align(count * element, 4);
  pre_align(count * element, element);
  size_ += count * element;
  push(4);
}

inline void HeaderSizeModel::start_table() {
  table_start_ = size_;
  field_at_[0] = field_at_[1] = field_at_[2] = 0;
}

inline void HeaderSizeModel::field(int id, uint64_t scalar) { field_at_[id] = push(scalar); }

inline void HeaderSizeModel::end_table() {
  const uint64_t at = push(4);  // the vtable offset
  int last = -1;
  for (int id = 0; id < 3; ++id) {
    if (field_at_[id] != 0) last = id;
  }
  Vtable vtable{static_cast<uint16_t>(std::max(4 + 2 * (last + 1), 4)),
                static_cast<uint16_t>(at - table_start_),
                {0, 0, 0}};
  for (int id = 0; id < 3; ++id) {
    if (field_at_[id] != 0) vtable.fields[id] = static_cast<uint16_t>(at - field_at_[id]);
  }
  if (std::find(vtables_.begin(), vtables_.end(), vtable) != vtables_.end()) return;
  size_ += vtable.bytes;
  vtables_.push_back(vtable);
}

void HeaderSizeModel::add(uint64_t key_length, uint64_t rank, bool opaque) {
  // build_flatbuffer's calls for one entry; field ids 0, 1, 2 are voffsets 4, 6, 8.
  ++entries_;
  string(key_length);
  if (opaque) {  // NamedData(key, segment_index)
    start_table();
    field(1, 4);
    field(0, 4);
    end_table();
    return;
  }
  vector(rank, 4);  // sizes
  vector(rank, 1);  // dim_order
  start_table();    // TensorLayout(scalar_type, sizes, dim_order)
  field(2, 4);
  field(1, 4);
  field(0, 1);
  end_table();
  start_table();  // NamedData(key, segment_index, tensor_layout)
  field(2, 4);
  field(1, 4);
  field(0, 4);
  end_table();
}

uint64_t HeaderSizeModel::flatbuffer_size(uint64_t segments) {
  for (uint64_t s = 0; s < segments; ++s) {  // DataSegment(offset, size)
    start_table();
    field(1, 8);
    field(0, 8);
    end_table();
  }
  vector(segments, 4);
  vector(entries_, 4);
  start_table();  // FlatTensor(version, segments, named_data)
  field(2, 4);
  field(1, 4);
  field(0, 4);
  end_table();
  pre_align(8, min_align_);  // root offset and file identifier
  size_ += 4;
  push(4);
  return size_;
}

namespace {

struct SegmentPlan {
  uint64_t data_size = 0;     // the data section's size
  uint64_t header_bound = 0;  // head_bound_* summed over the file
};

// plan_file's checks, then each segment's offset from the data section's start
// (into `relative`).
SegmentPlan plan_segments(std::span<const Entry> entries,
                          const std::vector<uint64_t>& segment_sizes, uint64_t alignment,
                          std::vector<uint64_t>& relative) {
  if (alignment < 16 || (alignment & (alignment - 1)) != 0) {
    fail(ErrorCode::internal, ".ptd plan: alignment {} is not a power of two >= 16", alignment);
  }
  check_entries(entries, segment_sizes);

  // Checked before building: FlatBufferBuilder aborts past 2 GiB instead of failing.
  SegmentPlan plan;
  uint64_t bound = head_bound_fixed() + segment_sizes.size() * head_bound_segment();
  for (const Entry& e : entries) bound += head_bound_entry(e.key.size(), e.shape.size());
  if (bound > Limits::max_header_bytes) {
    fail_input(".ptd: header of up to {} bytes for {} keys exceeds the limit of {} bytes", bound,
               entries.size(), Limits::max_header_bytes);
  }
  plan.header_bound = bound;

  relative.resize(segment_sizes.size());
  uint64_t data_size = 0;
  for (size_t s = 0; s < segment_sizes.size(); ++s) {
    auto start = s == 0 ? std::optional<uint64_t>(0) : align_up(data_size, alignment);
    auto end = start ? checked_add(*start, segment_sizes[s]) : std::nullopt;
    if (!end) {
      fail_input(".ptd: segment {} of {} bytes overflows the file size", s, segment_sizes[s]);
    }
    relative[s] = *start;
    data_size = *end;
  }
  plan.data_size = data_size;
  return plan;
}

// Where the segments start and where the file ends, for a flatbuffer of `fb_size` bytes.
std::pair<uint64_t, uint64_t> file_extent(uint64_t fb_size, uint64_t data_size,
                                          uint64_t alignment) {
  auto base = align_up(extended_header_size + fb_size, alignment);
  auto file_end = base ? checked_add(*base, data_size) : std::nullopt;
  if (!file_end) fail_input(".ptd: segment data of {} bytes overflows the file size", data_size);
  return {*base, *file_end};
}

}  // namespace

FileSizer::Sizes FileSizer::size(std::span<const Entry> entries,
                                 const std::vector<uint64_t>& segment_sizes, uint64_t alignment) {
  auto plan = plan_segments(entries, segment_sizes, alignment, relative_);
  builder_.Clear();
  build_flatbuffer(builder_, entries, segment_sizes, relative_);
  const uint64_t fb_size = builder_.GetSize();
  return {extended_header_size + fb_size, file_extent(fb_size, plan.data_size, alignment).second};
}

Layout plan_file(const std::vector<Entry>& entries, const std::vector<uint64_t>& segment_sizes,
                 uint64_t alignment) {
  std::vector<uint64_t> relative;
  auto plan = plan_segments(entries, segment_sizes, alignment, relative);
  const uint64_t data_size = plan.data_size;
  flatbuffers::FlatBufferBuilder builder(static_cast<size_t>(plan.header_bound));
  build_flatbuffer(builder, entries, segment_sizes, relative);
  const uint8_t* fb = builder.GetBufferPointer();
  const uint64_t fb_size = builder.GetSize();

  Layout layout;
  auto [segment_base, file_end] = file_extent(fb_size, data_size, alignment);
  layout.segment_base = segment_base;
  layout.header_size = extended_header_size + fb_size;
  layout.file_size = file_end;
  for (uint64_t offset : relative) layout.segment_offsets.push_back(segment_base + offset);

  // The header goes inside the flatbuffer after root offset and identifier; every
  // offset in the flatbuffer is relative except the root offset, so only it moves.
  std::string& head = layout.head;
  head.reserve(static_cast<size_t>(segment_base));
  put_u32(head, static_cast<uint32_t>(load_u32(fb) + extended_header_size));
  head.append(reinterpret_cast<const char*>(fb) + 4, 4);
  head.append(kHeaderMagic);
  put_u32(head, static_cast<uint32_t>(extended_header_length));
  put_u64(head, extended_header_size);  // flatbuffer_offset, as the reference writer records it
  put_u64(head, fb_size);               // flatbuffer size before the insertion
  put_u64(head, segment_base);
  put_u64(head, data_size);
  head.resize(static_cast<size_t>(kPrefixSize + extended_header_size), '\0');
  head.append(reinterpret_cast<const char*>(fb) + kPrefixSize,
              static_cast<size_t>(fb_size - kPrefixSize));
  head.resize(static_cast<size_t>(segment_base), '\0');
  return layout;
}

}  // namespace ptepack::ptd
