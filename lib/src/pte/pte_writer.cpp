// ExecuTorch program (.pte) rewriter: new segments, EXTERNAL or inline constants, eh00 header.
#include <algorithm>
#include <map>
#include <set>

#include "pte/pte_copy.h"
#include "pte/pte_frame.h"
#include "base/byte_reader.h"
#include "base/checked.h"
#include "ptepack/base/error.h"
#include "ptepack/pte/pte.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::pte {
namespace {

namespace fb = flatbuffers;
namespace et = executorch_flatbuffer;
using detail::Copier;
using detail::Field;

using namespace detail;  // schema slots, aligned(), frame()

bool same_range(const ByteRange& a, const ByteRange& b) {
  return a.file == b.file && a.offset == b.offset && a.size == b.size;
}

// One segment of the output: its pieces relative to the segment start.
struct OutSegment {
  uint64_t size = 0;
  std::vector<std::pair<uint64_t, ByteRange>> pieces;
  uint64_t offset = 0;  // relative to the segment base, assigned by place()
};

struct SegmentPlan {
  std::vector<OutSegment> segments;
  std::vector<uint64_t> constant_offsets;  // [0] placeholder, then one per buffer
  std::map<uint32_t, uint32_t> kept;       // old segment index -> new index
  std::vector<uint32_t> named_segment;     // per output named_data entry
  uint64_t data_size = 0;
};

SegmentPlan plan_segments(const Program& in, const Rewrite& rw, uint64_t alignment) {
  SegmentPlan plan;
  OutSegment constants;
  plan.constant_offsets.push_back(0);
  const uint64_t tensor_alignment =
      rw.constant_alignment != 0 ? rw.constant_alignment : in.tensor_alignment;
  for (const ByteRange& buffer : rw.constants) {
    const uint64_t at = constants.size == 0 ? 0 : aligned(constants.size, tensor_alignment);
    plan.constant_offsets.push_back(at);
    if (buffer.size > 0) constants.pieces.emplace_back(at, buffer);
    constants.size = at + buffer.size;
  }
  plan.segments.push_back(std::move(constants));

  std::set<uint32_t> keep;
  const et::Program& root = *in.root();
  for (const Delegate& d : in.delegates) {
    if (!d.inline_data) keep.insert(d.index);
  }
  if (const auto* mutables = root.mutable_data_segments()) {
    for (const auto* sub : *mutables) {
      if (sub->offsets() != nullptr && sub->offsets()->size() > 0)
        keep.insert(sub->segment_index());
    }
  }
  for (uint32_t old : keep) {
    plan.kept[old] = static_cast<uint32_t>(plan.segments.size());
    const Segment& s = in.segments[old];
    OutSegment out;
    out.size = s.size;
    if (s.size > 0) out.pieces.emplace_back(0, ByteRange{in.file, s.offset, s.size});
    plan.segments.push_back(std::move(out));
  }
  std::vector<std::pair<ByteRange, uint32_t>> named;
  for (const auto& entry : rw.named_data) {
    const ByteRange& range = entry.second;
    auto it = std::find_if(named.begin(), named.end(),
                           [&](const auto& e) { return same_range(e.first, range); });
    if (it != named.end()) {
      plan.named_segment.push_back(it->second);
      continue;
    }
    auto index = static_cast<uint32_t>(plan.segments.size());
    named.emplace_back(range, index);
    plan.named_segment.push_back(index);
    OutSegment out;
    out.size = range.size;
    if (range.size > 0) out.pieces.emplace_back(0, range);
    plan.segments.push_back(std::move(out));
  }
  // Empty segments sit at offset 0 (as ExecuTorch writes {0, 0}): the loader
  // checks offset + size against the file even for an empty one.
  uint64_t end = 0;
  for (OutSegment& s : plan.segments) {
    s.offset = s.size == 0 ? 0 : aligned(end, alignment);
    if (s.size > 0) end = s.offset + s.size;
  }
  plan.data_size = end;
  return plan;
}

class Editor {
 public:
  Editor(const Program& in, const Rewrite& rw, const SegmentPlan& plan) : rw_(rw), plan_(plan) {
    for (size_t i = 0; i < in.tensors.size(); ++i) {
      const auto* t = in.tensors[i].table;
      by_tensor_.emplace(t, i);
      if (t->extra_tensor_info() != nullptr) by_extra_.emplace(t->extra_tensor_info(), i);
    }
    if (const auto* mutables = in.root()->mutable_data_segments()) {
      for (const auto* sub : *mutables) mutable_subs_.insert(sub);
    }
  }

  // Fields the edits replace are not copied first, so no unreferenced bytes
  // are left behind and equal programs give equal bytes however they were reached.
  [[nodiscard]] bool skips(const fb::Table* source, const fb::TypeTable* type,
                           uint16_t slot) const {
    if (type == et::ProgramTypeTable()) {
      return slot == kConstantBuffer || slot == kSegments || slot == kConstantSegment ||
             slot == kNamedData;
    }
    if (type == et::ExtraTensorInfoTypeTable() && slot == kFullyQualifiedName) {
      const TensorEdit* e = edit_of(by_extra_, source);
      return e != nullptr && e->kind == TensorEdit::Kind::external;
    }
    return false;
  }

  void operator()(Copier& copier, const fb::Table* source, const fb::TypeTable* type,
                  std::vector<Field>& fields) const {
    if (type == et::ProgramTypeTable()) {
      program(copier, fields);
    } else if (type == et::TensorTypeTable()) {
      tensor(copier, source, fields);
    } else if (type == et::ExtraTensorInfoTypeTable()) {
      extra(copier, source, fields);
    } else if (type == et::BackendDelegateDataReferenceTypeTable()) {
      const auto* ref = reinterpret_cast<const et::BackendDelegateDataReference*>(source);
      if (ref->location() == et::DataLocation::SEGMENT) {
        detail::set_scalar(fields, 1, 4, plan_.kept.at(ref->index()));
      }
    } else if (type == et::SubsegmentOffsetsTypeTable() &&
               mutable_subs_.count(reinterpret_cast<const et::SubsegmentOffsets*>(source))) {
      const auto* sub = reinterpret_cast<const et::SubsegmentOffsets*>(source);
      auto it = plan_.kept.find(sub->segment_index());
      if (it != plan_.kept.end()) detail::set_scalar(fields, 0, 4, it->second);
    }
  }

 private:
  void program(Copier& copier, std::vector<Field>& fields) const {
    auto& b = copier.builder();
    std::vector<fb::Offset<fb::Table>> segments;
    for (const OutSegment& s : plan_.segments) {
      segments.push_back(copier.table({{0, false, 8, s.offset, 0}, {1, false, 8, s.size, 0}}));
    }
    detail::set_offset(fields, kSegments, b.CreateVector(segments).o);
    const auto offsets = b.CreateVector(plan_.constant_offsets).o;
    detail::set_offset(fields, kConstantSegment,
                       copier.table({{0, false, 4, 0, 0}, {1, true, 4, 0, offsets}}));
    if (std::any_of(fields.begin(), fields.end(),
                    [](const Field& f) { return f.slot == kConstantBuffer; })) {
      detail::set_offset(fields, kConstantBuffer,
                         b.CreateVector(std::vector<fb::Offset<fb::Table>>{}).o);
    }
    detail::remove_field(fields, kNamedData);
    if (!rw_.named_data.empty()) {
      std::vector<fb::Offset<fb::Table>> named;
      for (size_t k = 0; k < rw_.named_data.size(); ++k) {
        const auto key = copier.string(rw_.named_data[k].first);
        named.push_back(
            copier.table({{0, true, 4, 0, key}, {1, false, 4, plan_.named_segment[k], 0}}));
      }
      detail::set_offset(fields, kNamedData, b.CreateVector(named).o);
    }
  }

  const TensorEdit* edit_of(const std::map<const void*, size_t>& index, const void* table) const {
    auto it = index.find(table);
    return it == index.end() ? nullptr : &rw_.tensors[it->second];
  }

  void tensor(Copier& copier, const fb::Table* source, std::vector<Field>& fields) const {
    const TensorEdit* e = edit_of(by_tensor_, source);
    if (e == nullptr || e->kind == TensorEdit::Kind::keep) return;
    if (e->kind == TensorEdit::Kind::constant) {
      detail::set_scalar(fields, kDataBufferIdx, 4, uint64_t{e->buffer} + 1);
      return;
    }
    // EXTERNAL: the runtime ignores data_buffer_idx; 0 keeps it from pointing
    // past the rebuilt constant segment.
    if (source->CheckField(4 + 2 * kDataBufferIdx)) {
      detail::set_scalar(fields, kDataBufferIdx, 4, 0);
    }
    if (reinterpret_cast<const et::Tensor*>(source)->extra_tensor_info() == nullptr) {
      const auto name = copier.string(e->key);
      detail::set_offset(
          fields, kExtraTensorInfo,
          copier.table({{kFullyQualifiedName, true, 4, 0, name}, {kLocation, false, 1, 1, 0}}));
    }
  }

  void extra(Copier& copier, const fb::Table* source, std::vector<Field>& fields) const {
    const TensorEdit* e = edit_of(by_extra_, source);
    if (e == nullptr || e->kind == TensorEdit::Kind::keep) return;
    const auto* info = reinterpret_cast<const et::ExtraTensorInfo*>(source);
    if (e->kind == TensorEdit::Kind::constant) {
      if (info->location() == et::TensorDataLocation::EXTERNAL) {
        detail::set_scalar(fields, kLocation, 1, 0);
      }
      return;
    }
    detail::set_offset(fields, kFullyQualifiedName, copier.string(e->key));
    detail::set_scalar(fields, kLocation, 1, 1);
  }

  const Rewrite& rw_;
  const SegmentPlan& plan_;
  std::map<const void*, size_t> by_tensor_;
  std::map<const void*, size_t> by_extra_;
  std::set<const void*> mutable_subs_;
};

}  // namespace

Layout rewrite(const Program& in, const Rewrite& rw) {
  const std::string& name = in.file->name();
  if (!in.not_rewritable.empty()) {
    fail_input("{}: cannot rewrite: {} (ptepack would lose it; dump and verify still read it)",
               name, in.not_rewritable.front());
  }
  if (rw.tensors.size() != in.tensors.size()) {
    fail(ErrorCode::internal, "{}: rewrite plan covers {} of {} tensors", name, rw.tensors.size(),
         in.tensors.size());
  }
  const uint64_t alignment =
      std::max(rw.alignment, std::min(in.segment_alignment, kMaxSegmentAlignment));
  const SegmentPlan plan = plan_segments(in, rw, alignment);

  fb::FlatBufferBuilder builder(in.flatbuffer.size() + 1024);
  Editor editor(in, rw, plan);
  Copier* self = nullptr;
  Copier copier(
      builder,
      [&](const fb::Table* source, const fb::TypeTable* type, std::vector<Field>& fields) {
        editor(*self, source, type, fields);
      },
      [&](const fb::Table* source, const fb::TypeTable* type, uint16_t slot) {
        return editor.skips(source, type, slot);
      },
      in.inline_alignment);
  self = &copier;
  const auto root =
      copier.copy(reinterpret_cast<const fb::Table*>(in.root()), et::ProgramTypeTable());
  builder.Finish(fb::Offset<fb::Table>(root), et::ProgramIdentifier());
  const uint8_t* buffer = builder.GetBufferPointer();
  const uint64_t size = builder.GetSize();

  Layout out;
  auto framed = frame(buffer, size, in.inline_alignment, alignment, plan.data_size);
  out.head = std::move(framed.head);
  if (plan.data_size == 0) {
    out.file_size = size;
    return out;
  }
  const uint64_t base = framed.base;
  for (const OutSegment& s : plan.segments) {
    for (const auto& [at, range] : s.pieces) out.pieces.emplace_back(base + s.offset + at, range);
  }
  out.file_size = base + plan.data_size;
  return out;
}

}  // namespace ptepack::pte

namespace ptepack::pte::detail {

uint64_t aligned(uint64_t value, uint64_t alignment) {
  auto out = align_up(value, alignment);
  if (!out) fail_input("rewritten program: offset overflows");
  return *out;
}

Framed frame(const uint8_t* buffer, uint64_t size, uint64_t inline_alignment,
             uint64_t segment_alignment, uint64_t data_size) {
  Framed out;
  if (data_size == 0) {
    out.head.assign(reinterpret_cast<const char*>(buffer), size);
    return out;
  }
  const uint64_t padded = std::max<uint64_t>(header_length, inline_alignment);
  const uint64_t program_size = size + padded;
  out.base = aligned(program_size, segment_alignment);
  put_u32(out.head, static_cast<uint32_t>(load_u32(buffer) + padded));
  out.head.append(reinterpret_cast<const char*>(buffer) + 4, 4);
  out.head.append("eh00");
  put_u32(out.head, static_cast<uint32_t>(header_length));
  put_u64(out.head, program_size);
  put_u64(out.head, out.base);
  put_u64(out.head, data_size);
  out.head.resize(static_cast<size_t>(8 + padded), '\0');
  out.head.append(reinterpret_cast<const char*>(buffer) + 8, static_cast<size_t>(size - 8));
  out.head.resize(static_cast<size_t>(out.base), '\0');
  return out;
}

}  // namespace ptepack::pte::detail
