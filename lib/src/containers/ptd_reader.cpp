// ExecuTorch FlatTensor (.ptd): the validating reader (and recognising the 0.6 layout).
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
#include "ptepack/schema/flat_tensor_v06_generated.h"

namespace ptepack::ptd {
namespace {

namespace fbs = flat_tensor_flatbuffer;
using executorch_flatbuffer::ScalarType;
using namespace detail;  // the shared format constants


}  // namespace

namespace {

// The FH01 fields, validated against each other and the file size.
struct Header {
  uint64_t flatbuffer_offset = 0;  // bytes inserted after the first 8
  uint64_t flatbuffer_size = 0;    // size of the flatbuffer before insertion
  uint64_t flatbuffer_end = 0;     // the flatbuffer as stored spans [0, flatbuffer_end)
  uint64_t segment_base = 0;
  uint64_t segment_data_size = 0;
};

Header read_header(const InputFile& file) {
  const std::string& name = file.name();
  constexpr uint64_t kMinSize = kPrefixSize + extended_header_length;
  if (file.size() < kMinSize) {
    fail_input("{}: {} bytes is too small for a .ptd file (the FH01 header ends at {})", name,
               file.size(), kMinSize);
  }
  std::array<uint8_t, kMinSize> raw{};
  file.read_at(0, raw);
  auto text = [&](size_t at) {
    return std::string_view(reinterpret_cast<const char*>(&raw[at]), 4);
  };
  if (text(4) != kIdentifier) {
    fail_input("{}: not a FlatTensor file: identifier {} at offset 4 (expected 'FT01')", name,
               quote(text(4)));
  }
  if (text(8) != kHeaderMagic) {
    fail_input("{}: missing FH01 extended header: found {} at offset 8", name,
               quote(text(8)));
  }
  const uint32_t length = load_u32(&raw[12]);
  if (length < extended_header_length) {
    fail_input("{}: FH01 header length {} is less than {}", name, length, extended_header_length);
  }
  Header h;
  h.flatbuffer_offset = load_u64(&raw[16]);
  h.flatbuffer_size = load_u64(&raw[24]);
  h.segment_base = load_u64(&raw[32]);
  h.segment_data_size = load_u64(&raw[40]);
  // The header lives in the bytes inserted after the prefix; it cannot run into the flatbuffer.
  if (length > h.flatbuffer_offset) {
    fail_input("{}: FH01 header length {} runs past flatbuffer_offset {}", name, length,
               h.flatbuffer_offset);
  }
  auto fb_end = checked_add(h.flatbuffer_offset, h.flatbuffer_size);
  if (h.flatbuffer_size < kPrefixSize || !fb_end || *fb_end > file.size()) {
    fail_input("{}: flatbuffer_offset {} + flatbuffer_size {} does not fit the file ({} bytes)",
               name, h.flatbuffer_offset, h.flatbuffer_size, file.size());
  }
  if (*fb_end > Limits::max_header_bytes || *fb_end >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    fail_input("{}: flatbuffer of {} bytes exceeds the limit of {} bytes", name, *fb_end,
               Limits::max_header_bytes);
  }
  h.flatbuffer_end = *fb_end;
  if (h.segment_base < h.flatbuffer_end) {
    fail_input("{}: segment_base_offset {} overlaps the flatbuffer ending at {}", name,
               h.segment_base, h.flatbuffer_end);
  }
  auto data_end = checked_add(h.segment_base, h.segment_data_size);
  if (!data_end || *data_end > file.size()) {
    fail_input("{}: segment_base_offset {} + segment_data_size {} exceeds the file size {}", name,
               h.segment_base, h.segment_data_size, file.size());
  }
  return h;
}

DType layout_dtype(const std::string& name, const std::string& key, ScalarType type) {
  const int id = static_cast<int>(type);
  if (auto dtype = dtype_from_ptd(id)) return *dtype;
  fail_input("{}: key {}: unknown scalar type {}", name, quote(key), id);
}

// Shape and dim order from a TensorLayout; dim_order must be a permutation.
Shape layout_shape(const std::string& name, const std::string& key, const fbs::TensorLayout& layout,
                   std::vector<uint8_t>& dim_order_out) {
  const auto* sizes = layout.sizes();
  const auto* dim_order = layout.dim_order();
  if (sizes == nullptr || dim_order == nullptr) {
    fail_input("{}: key {}: tensor_layout has no {}", name, quote(key),
               sizes == nullptr ? "sizes" : "dim_order");
  }
  if (sizes->size() > Limits::max_rank) {
    fail_input("{}: key {}: rank {} exceeds the limit {}", name, quote(key),
               sizes->size(), Limits::max_rank);
  }
  if (dim_order->size() != sizes->size()) {
    fail_input("{}: key {}: dim_order has {} entries for rank {}", name, quote(key),
               dim_order->size(), sizes->size());
  }
  Shape shape;
  std::vector<int> order;
  for (flatbuffers::uoffset_t d = 0; d < sizes->size(); ++d) {
    if (sizes->Get(d) < 0) {
      fail_input("{}: key {}: size[{}] = {} is negative", name, quote(key), d,
                 sizes->Get(d));
    }
    shape.push_back(sizes->Get(d));
    order.push_back(dim_order->Get(d));
  }
  std::vector<bool> seen(order.size(), false);
  bool identity = true;
  for (size_t d = 0; d < order.size(); ++d) {
    auto v = static_cast<size_t>(order[d]);
    if (v >= order.size() || seen[v]) {
      fail_input("{}: key {}: dim_order [{}] is not a permutation", name, quote(key),
                 fmt::join(order, ", "));
    }
    seen[v] = true;
    identity = identity && v == d;
  }
  dim_order_out.clear();
  if (!identity) {
    for (int v : order) dim_order_out.push_back(static_cast<uint8_t>(v));
  }
  return shape;
}

// The older layout: its FlatTensor root verifies, and carries `segments` or
// `named_data` in slots 3 and 4, past the current schema's three fields.
bool written_by_executorch_06(const std::vector<uint8_t>& buffer, flatbuffers::Verifier& verifier) {
  if (!flat_tensor_v06::VerifyFlatTensorBuffer(verifier)) return false;
  const auto* root = flat_tensor_v06::GetFlatTensor(buffer.data());
  return root->segments() != nullptr || root->tensors() != nullptr;
}

// The FlatTensor root of `buffer`, verified, with both vectors within limits.
const fbs::FlatTensor* verified_root(const std::string& name, const std::vector<uint8_t>& buffer) {
  // Tables: the root, one per segment, two per key; depth: root, vector, NamedData,
  // TensorLayout, vector.
  flatbuffers::Verifier::Options options;
  options.max_depth = 16;
  options.max_tables = static_cast<flatbuffers::uoffset_t>(3 * Limits::max_keys + 16);
  options.check_alignment = true;
  flatbuffers::Verifier verifier(buffer.data(), buffer.size(), options);
  if (!fbs::VerifyFlatTensorBuffer(verifier)) {
    flatbuffers::Verifier old(buffer.data(), buffer.size(), options);
    if (written_by_executorch_06(buffer, old)) {
      fail_input(
          "{}: a .ptd in the FlatTensor layout of ExecuTorch 0.6 (before June 2025: tensors "
          "listed apart from named data), which ExecuTorch 0.7 and later no longer read; "
          "re-export it with ExecuTorch 0.7 or later",
          name);
    }
    fail_input("{}: FlatTensor flatbuffer ({} bytes) failed verification", name, buffer.size());
  }
  const fbs::FlatTensor* root = fbs::GetFlatTensor(buffer.data());
  // The ExecuTorch loader rejects a file without either vector, so ptepack does too.
  if (root->segments() == nullptr || root->named_data() == nullptr) {
    fail_input("{}: FlatTensor has no {} vector", name,
               root->segments() == nullptr ? "segments" : "named_data");
  }
  if (root->segments()->size() > Limits::max_keys ||
      root->named_data()->size() > Limits::max_keys) {
    fail_input("{}: {} segments and {} keys exceed the limit of {}", name, root->segments()->size(),
               root->named_data()->size(), Limits::max_keys);
  }
  return root;
}

// Entry i of named_data: its key checked, its segment, its layout or none.
void read_named_data(const InputFilePtr& file, const fbs::NamedData& named,
                     flatbuffers::uoffset_t i, File& out) {
  const std::string& name = out.name;
  if (named.key() == nullptr) fail_input("{}: named_data[{}] has no key", name, i);
  if (named.key()->size() == 0) fail_input("{}: named_data[{}] has an empty key", name, i);
  if (named.key()->size() > Limits::max_key_length) {
    fail_input("{}: named_data[{}]: key of {} bytes exceeds the limit of {}", name, i,
               named.key()->size(), Limits::max_key_length);
  }
  std::string key = named.key()->str();
  // The runtime looks keys up as C strings; an embedded NUL would make the key unreachable.
  check_name(key, "key", fmt::format("{}: named_data[{}]", name, i));
  if (out.tensors.count(key) != 0) fail_input("{}: duplicate key {}", name, quote(key));
  const uint32_t index = named.segment_index();
  if (index >= out.segments.size()) {
    fail_input("{}: key {}: segment_index {} is out of range ({} segments)", name,
               quote(key), index, out.segments.size());
  }
  const Segment& segment = out.segments[index];
  TensorData tensor;
  tensor.bytes = ByteRange{file, segment.offset, segment.size};
  if (const fbs::TensorLayout* layout = named.tensor_layout()) {
    tensor.dtype = layout_dtype(name, key, layout->scalar_type());
    tensor.shape = layout_shape(name, key, *layout, tensor.dim_order);
    auto bytes = byte_size(tensor.dtype, tensor.shape);
    if (!bytes || *bytes != segment.size) {
      fail_input("{}: key {}: layout {} [{}] needs {} bytes but segment {} holds {}", name,
                 quote(key), dtype_name(tensor.dtype), fmt::join(tensor.shape, ", "),
                 bytes ? fmt::to_string(*bytes) : std::string("too many"), index, segment.size);
    }
  } else {
    tensor = opaque_tensor(tensor.bytes);
  }
  ++out.segment_keys[index];
  out.tensors.emplace(std::move(key), std::move(tensor));
}

}  // namespace

File read_file(const InputFilePtr& file) {
  const std::string& name = file->name();
  const Header h = read_header(*file);
  const std::vector<uint8_t> buffer = file->read_range(0, h.flatbuffer_end);
  const fbs::FlatTensor* root = verified_root(name, buffer);
  File out;
  out.name = name;
  out.version = root->version();
  out.segment_base = h.segment_base;
  for (flatbuffers::uoffset_t s = 0; s < root->segments()->size(); ++s) {
    const fbs::DataSegment* segment = root->segments()->Get(s);
    if (!range_within(segment->offset(), segment->size(), h.segment_data_size)) {
      fail_input("{}: segment {} (offset {}, size {}) is outside the segment data ({} bytes)", name,
                 s, segment->offset(), segment->size(), h.segment_data_size);
    }
    out.segments.push_back({h.segment_base + segment->offset(), segment->size()});
  }
  out.segment_keys.assign(out.segments.size(), 0);
  for (flatbuffers::uoffset_t i = 0; i < root->named_data()->size(); ++i) {
    read_named_data(file, *root->named_data()->Get(i), i, out);
  }
  return out;
}

}  // namespace ptepack::ptd
