// ExecuTorch program (.pte) reader: header, verified flatbuffer, segments and every index checked.
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <optional>
#include <set>

#include "pte/pte_copy.h"
#include "pte/pte_frame.h"
#include "pte/pte_plans.h"
#include "base/byte_reader.h"
#include "base/checked.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "ptepack/pte/pte.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::pte {
namespace {

namespace fb = flatbuffers;
namespace et = executorch_flatbuffer;

constexpr std::string_view kIdentifier = "ET12";
constexpr std::string_view kHeaderMagic = "eh00";
constexpr uint64_t kMinHeaderLength = 24;
constexpr uint64_t kMaxAlignment = 4096;
constexpr uint64_t kDefaultTensorAlignment = 16;  // ExecuTorch's constant_tensor_alignment
constexpr uint64_t kDefaultSegmentAlignment = 128;  // ExecuTorch's segment_alignment

uint64_t low_bit(uint64_t v) { return v == 0 ? uint64_t{1} << 63 : v & (~v + 1); }

// A piece of a file an exporter padded to its alignment: where it starts and
// how many bytes it holds (nullopt: unknown, so the gap after it shows nothing).
struct Span {
  uint64_t start = 0;
  std::optional<uint64_t> size;
};

// The alignment an exporter that pads each piece to the next multiple of it
// used, read from the gaps between consecutive pieces (docs/format-pte.md,
// "Alignment from evidence"): the smallest power of two, at least `floor`, that
// every next start is the previous end rounded up to. `floor` when no gap shows
// padding; nullopt when the starts fit no power of two up to `cap`.
std::optional<uint64_t> alignment_from_gaps(std::vector<Span> spans, uint64_t floor,
                                            uint64_t cap) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.start != b.start ? a.start < b.start : a.size < b.size;
  });
  uint64_t alignment = floor;
  for (size_t k = 1; k < spans.size(); ++k) {
    const Span& before = spans[k - 1];
    if (!before.size || spans[k].start == before.start) continue;
    const uint64_t end = before.start + *before.size;
    if (spans[k].start < end) return std::nullopt;  // overlapping: no padding to read
    alignment = std::max(alignment, std::bit_ceil(spans[k].start - end + 1));
  }
  if (alignment > cap) return std::nullopt;
  for (const Span& span : spans) {
    if (span.start % alignment != 0) return std::nullopt;
  }
  return alignment;
}

Header read_header(const InputFile& file) {
  const std::string& name = file.name();
  if (file.size() < 8)
    fail_input("{}: {} bytes is too small for a .pte program", name, file.size());
  std::array<uint8_t, 8 + header_length> raw{};
  file.read_at(0, std::span<uint8_t>(raw.data(), std::min<size_t>(raw.size(), file.size())));
  auto text = [&](size_t at) {
    return std::string_view(reinterpret_cast<const char*>(&raw[at]), 4);
  };
  if (text(4) != kIdentifier) {
    fail_input("{}: not an ExecuTorch program: identifier {} at offset 4 (expected 'ET12')", name,
               quote(text(4)));
  }
  Header h;
  h.program_size = file.size();
  if (file.size() < 8 + kMinHeaderLength || text(8) != kHeaderMagic) return h;
  h.present = true;
  h.length = load_u32(&raw[12]);
  h.program_size = load_u64(&raw[16]);
  h.segment_base = load_u64(&raw[24]);
  if (h.length < kMinHeaderLength) {
    fail_input("{}: eh00 header length {} is less than {}", name, h.length, kMinHeaderLength);
  }
  if (h.length >= header_length) {
    if (file.size() < 8 + header_length) {
      fail_input("{}: eh00 header of length {} is cut off by the end of the file", name, h.length);
    }
    h.segment_data_size = load_u64(&raw[32]);
  }
  if (h.program_size < 8 + uint64_t{h.length} || h.program_size > file.size()) {
    fail_input("{}: eh00 program_size {} is outside the file ({} bytes, header ends at {})", name,
               h.program_size, file.size(), 8 + uint64_t{h.length});
  }
  if (h.segment_base != 0) {
    auto end = checked_add(h.segment_base, h.segment_data_size);
    if (h.segment_base < h.program_size || !end || *end > file.size()) {
      fail_input(
          "{}: eh00 segment_base_offset {} + segment_data_size {} is outside [program_size {}, "
          "file size {}]",
          name, h.segment_base, h.segment_data_size, h.program_size, file.size());
    }
  } else if (h.segment_data_size != 0) {
    fail_input("{}: eh00 segment_data_size {} without a segment_base_offset", name,
               h.segment_data_size);
  }
  if (h.program_size > max_flatbuffer_bytes) {
    fail_input("{}: program flatbuffer of {} bytes exceeds the 2 GiB limit", name, h.program_size);
  }
  return h;
}

template <typename T>
uint32_t count(const fb::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

void check_subsegment(const std::string& name, const et::SubsegmentOffsets& sub,
                      const std::vector<Segment>& segments, const std::string& what) {
  if (count(sub.offsets()) == 0) return;
  if (sub.segment_index() >= segments.size()) {
    fail_input("{}: {}.segment_index {} is out of range ({} segments)", name, what,
               sub.segment_index(), segments.size());
  }
  const uint64_t size = segments[sub.segment_index()].size;
  for (uint32_t k = 0; k < sub.offsets()->size(); ++k) {
    if (sub.offsets()->Get(k) > size) {
      fail_input("{}: {}.offsets[{}] = {} is past the end of segment {} ({} bytes)", name, what, k,
                 sub.offsets()->Get(k), sub.segment_index(), size);
    }
  }
}

void read_segments(const std::string& name, const et::Program& root, Program& out) {
  const Header& h = out.header;
  const uint64_t data_end = h.segment_base + h.segment_data_size;
  const bool sized = h.present && h.length >= header_length;
  std::vector<std::pair<uint64_t, uint64_t>> used;
  uint64_t alignment = kMaxAlignment * 16;
  for (uint32_t s = 0; s < count(root.segments()); ++s) {
    const auto* seg = root.segments()->Get(s);
    // Even an empty segment's offset must lie in the file: the loader checks
    // offset + size against the file size for every segment it loads.
    auto start = checked_add(h.segment_base, seg->offset());
    if (!start || *start > out.file->size()) {
      fail_input("{}: segments[{}] (offset {}, size {}) starts past the end of the file", name, s,
                 seg->offset(), seg->size());
    }
    Segment segment{*start, seg->size()};
    if (seg->size() > 0) {
      if (h.segment_base == 0) {
        fail_input("{}: segments[{}] holds {} bytes but the file has no segment base (eh00)", name,
                   s, seg->size());
      }
      auto end = checked_add(h.segment_base, seg->offset());
      end = end ? checked_add(*end, seg->size()) : std::nullopt;
      if (!end || *end > out.file->size() || (sized && *end > data_end)) {
        fail_input("{}: segments[{}] (offset {}, size {}) runs past the segment data", name, s,
                   seg->offset(), seg->size());
      }
      used.emplace_back(segment.offset, *end);
      alignment = std::min(alignment, low_bit(segment.offset));
    }
    out.segments.push_back(segment);
  }
  std::sort(used.begin(), used.end());
  for (size_t k = 1; k < used.size(); ++k) {
    if (used[k].first < used[k - 1].second) {
      fail_input("{}: segments overlap at file offset {}", name, used[k].first);
    }
  }
  if (h.segment_base != 0) alignment = std::min(alignment, low_bit(h.segment_base));
  if (used.empty()) {
    out.segment_alignment = 1;
    return;
  }
  // The segment base is the flatbuffer's end rounded up, like every other start.
  std::vector<Span> spans{{0, h.program_size}};
  for (const auto& [start, end] : used) spans.push_back({start, end - start});
  out.segment_alignment =
      alignment_from_gaps(std::move(spans), kDefaultSegmentAlignment, detail::kMaxSegmentAlignment)
          .value_or(alignment);
}

}  // namespace

std::string_view storage_name(Storage storage) {
  switch (storage) {
    case Storage::constant_segment:
      return "constant segment";
    case Storage::constant_buffer:
      return "constant_buffer";
    case Storage::external:
      return "external";
    case Storage::mutable_state:
      return "mutable state";
    case Storage::none:
      break;
  }
  return "none";
}

const et::Program* Program::root() const { return et::GetProgram(flatbuffer.data()); }

bool looks_like_pte(std::span<const uint8_t> head) {
  return head.size() >= 8 && std::string_view(reinterpret_cast<const char*>(&head[4]), 4) == "ET12";
}

namespace {

// The flatbuffer verified, 8-byte values aligned, unknown fields noted.
void verify_flatbuffer(const std::string& name, Program& out) {
  fb::Verifier::Options options;
  options.max_depth = 64;
  options.max_tables = 64'000'000;
  options.check_alignment = true;
  fb::Verifier verifier(out.flatbuffer.data(), out.flatbuffer.size(), options);
  if (!et::VerifyProgramBuffer(verifier)) {
    fail_input("{}: Program flatbuffer ({} bytes) failed verification", name,
               out.flatbuffer.size());
  }
  const et::Program& root = *out.root();
  const auto misaligned =
      detail::find_misaligned(reinterpret_cast<const fb::Table*>(&root), et::ProgramTypeTable());
  if (!misaligned.empty()) {
    fail_input("{}: {}: 8-byte values not 8-byte aligned", name, misaligned);
  }
  detail::find_unknown(reinterpret_cast<const fb::Table*>(&root), et::ProgramTypeTable(),
                       out.not_rewritable);
}

void read_named_data(const InputFilePtr& file, const et::Program& root, Program& out) {
  const std::string& name = file->name();
  std::set<std::string> keys;
  for (uint32_t k = 0; k < count(root.named_data()); ++k) {
    const auto* nd = root.named_data()->Get(k);
    if (nd->key() == nullptr || nd->key()->size() == 0 ||
        nd->key()->size() > Limits::max_key_length ||
        std::string_view(nd->key()->c_str(), nd->key()->size()).find('\0') !=
            std::string_view::npos) {
      fail_input("{}: named_data[{}]: key must be 1 to {} bytes without NUL", name, k,
                 Limits::max_key_length);
    }
    std::string key = nd->key()->str();
    check_name(key, "key", fmt::format("{}: named_data[{}]", name, k));
    if (!keys.insert(key).second) fail_input("{}: named_data: duplicate key {}", name, quote(key));
    if (nd->segment_index() >= out.segments.size()) {
      fail_input("{}: named_data[{}] (key {}): segment_index {} is out of range ({} segments)",
                 name, k, quote(key), nd->segment_index(), out.segments.size());
    }
    const Segment& seg = out.segments[nd->segment_index()];
    out.named_data.push_back({std::move(key), nd->segment_index(), {file, seg.offset, seg.size}});
  }
}

void read_plans(const std::string& name, const et::Program& root, Program& out) {
  std::set<std::string> plan_names;
  for (uint32_t p = 0; p < root.execution_plan()->size(); ++p) {
    const auto* ep = root.execution_plan()->Get(p);
    if (ep->name() == nullptr) fail_input("{}: execution_plan[{}] has no name", name, p);
    check_name(ep->name()->str(), "method name", fmt::format("{}: execution_plan[{}]", name, p));
    if (!plan_names.insert(ep->name()->str()).second) {
      fail_input("{}: execution_plan[{}]: duplicate method name {}", name, p,
                 quote(ep->name()->str()));
    }
    out.plans.push_back(ep->name()->str());
    detail::read_plan(name, out, root, p);
  }
}

// Alignment that inline data and constant offsets keep in this file, never lowered on rewrite.
void measure_alignments(const et::Program& root, Program& out) {
  auto aligned_at = [&](uint64_t offset, uint64_t current) {
    return std::min(current, std::clamp<uint64_t>(low_bit(offset), 16, kMaxAlignment));
  };
  uint64_t inline_alignment = kMaxAlignment;
  bool any_inline = false;
  auto inline_data = [&](const fb::Vector<uint8_t>* data) {
    if (count(data) == 0) return;
    any_inline = true;
    inline_alignment =
        aligned_at(static_cast<uint64_t>(data->Data() - out.flatbuffer.data()), inline_alignment);
  };
  for (uint32_t k = 0; k < count(root.backend_delegate_data()); ++k) {
    inline_data(root.backend_delegate_data()->Get(k)->data());
  }
  for (uint32_t k = 0; k < count(root.constant_buffer()); ++k) {
    inline_data(root.constant_buffer()->Get(k)->storage());
  }
  out.inline_alignment = any_inline ? inline_alignment : 16;
  const auto* constants = root.constant_segment();
  const uint32_t buffers = constants == nullptr ? 0 : count(constants->offsets());
  // Each buffer's size is the largest value stored on it; index 0 is a placeholder.
  std::vector<Span> spans(buffers);
  for (uint32_t k = 0; k < buffers; ++k) spans[k].start = constants->offsets()->Get(k);
  for (const auto& t : out.tensors) {
    if (t.storage != Storage::constant_segment || t.buffer_index == 0 || t.buffer_index >= buffers)
      continue;
    auto& size = spans[t.buffer_index].size;
    size = std::max(size.value_or(0), t.nbytes);
  }
  uint64_t tensor_alignment = kMaxAlignment;
  for (uint32_t k = 1; k < buffers; ++k) tensor_alignment = aligned_at(spans[k].start, tensor_alignment);
  if (buffers > 0) spans.erase(spans.begin());
  out.tensor_alignment =
      alignment_from_gaps(std::move(spans), kDefaultTensorAlignment, kMaxAlignment)
          .value_or(tensor_alignment);
}

}  // namespace

Program read(const InputFilePtr& file) {
  const std::string& name = file->name();
  Program out;
  out.file = file;
  out.header = read_header(*file);
  out.flatbuffer = file->read_range(0, out.header.program_size);
  verify_flatbuffer(name, out);
  const et::Program& root = *out.root();
  if (root.execution_plan() == nullptr || root.execution_plan()->size() == 0) {
    fail_input("{}: program has no execution plans", name);
  }
  read_segments(name, root, out);
  const auto* constants = root.constant_segment();
  if (constants != nullptr) {
    check_subsegment(name, *constants, out.segments, "constant_segment");
    if (count(constants->offsets()) > 0 && count(root.constant_buffer()) > 0) {
      fail_input("{}: both constant_buffer ({} entries) and constant_segment.offsets are used",
                 name, count(root.constant_buffer()));
    }
  }
  for (uint32_t k = 0; k < count(root.mutable_data_segments()); ++k) {
    check_subsegment(name, *root.mutable_data_segments()->Get(k), out.segments,
                     fmt::format("mutable_data_segments[{}]", k));
  }
  read_named_data(file, root, out);
  read_plans(name, root, out);
  measure_alignments(root, out);
  return out;
}

}  // namespace ptepack::pte
