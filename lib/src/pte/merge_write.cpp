// Writing a merged .pte: the plans copied with their indices remapped, the program table, the frame.
#include "pte/merge_internal.h"
#include "pte/pte_copy.h"
#include "pte/pte_frame.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::pte::detail {
namespace {

namespace fb = flatbuffers;
namespace et = executorch_flatbuffer;

// Plan `plan` of input `i`, field for field, its indices and names remapped.
fb::uoffset_t copy_plan(fb::FlatBufferBuilder& builder, const MergePlan& mp,
                        const std::vector<MergeInput>& inputs, size_t i, uint32_t plan) {
  const Program& p = *inputs[i].program;
  const MergeRemap& r = mp.remaps[i];
  auto skip = [&](const fb::Table* source, const fb::TypeTable* type, uint16_t slot) {
    if (type == et::ExecutionPlanTypeTable()) {
      return slot == kPlanName || (slot == kNonConstBufferSizes && r.buffer_sizes.count(source));
    }
    if (type == et::ExtraTensorInfoTypeTable() && slot == kFullyQualifiedName) {
      auto it = r.extra.find(source);
      return it != r.extra.end() && it->second->storage == Storage::external &&
             r.fqn.count(it->second->fqn) != 0;
    }
    return false;
  };
  Copier* self = nullptr;
  auto edit = [&](const fb::Table* source, const fb::TypeTable* type, std::vector<Field>& fields) {
    if (type == et::ExecutionPlanTypeTable()) {
      set_offset(fields, kPlanName, self->string(r.plan_name.at(source)));
      if (auto sizes = r.buffer_sizes.find(source); sizes != r.buffer_sizes.end()) {
        set_offset(fields, kNonConstBufferSizes, self->builder().CreateVector(sizes->second).o);
      }
    } else if (type == et::AllocationDetailsTypeTable()) {
      if (auto it = r.moved.find(source); it != r.moved.end()) {
        const auto* a = reinterpret_cast<const et::AllocationDetails*>(source);
        set_scalar(fields, kMemoryId, 4, 2);
        set_scalar(fields, kMemoryOffsetLow, 4, it->second & 0xffffffffu);
        if ((it->second >> 32) != 0 || a->memory_offset_high() != 0 ||
            reinterpret_cast<const fb::Table*>(source)->CheckField(4 + 2 * kMemoryOffsetHigh)) {
          set_scalar(fields, kMemoryOffsetHigh, 4, it->second >> 32);
        }
      }
    } else if (type == et::TensorTypeTable()) {
      const TensorInfo* t = r.tensor.at(source);
      if (t->storage == Storage::mutable_state) {
        set_scalar(fields, kDataBufferIdx, 4, r.state.at(t->buffer_index));
      } else if (t->storage == Storage::constant_segment || t->storage == Storage::constant_buffer) {
        set_scalar(fields, kDataBufferIdx, 4, r.constant.at(t->buffer_index));
      }
    } else if (type == et::ExtraTensorInfoTypeTable()) {
      auto it = r.extra.find(source);
      if (it != r.extra.end() && it->second->storage == Storage::external) {
        auto renamed = r.fqn.find(it->second->fqn);
        if (renamed != r.fqn.end()) {
          set_offset(fields, kFullyQualifiedName, self->string(renamed->second));
        }
      }
    } else if (type == et::BackendDelegateDataReferenceTypeTable()) {
      const auto* ref = reinterpret_cast<const et::BackendDelegateDataReference*>(source);
      const auto& map = ref->location() == et::DataLocation::INLINE ? r.inline_data : r.segment;
      set_scalar(fields, kReferenceIndex, 4, map.at(ref->index()));
    }
  };
  Copier copier(builder, edit, skip, mp.inline_alignment);
  self = &copier;
  return copier.copy(reinterpret_cast<const fb::Table*>(p.root()->execution_plan()->Get(plan)),
                     et::ExecutionPlanTypeTable());
}

}  // namespace

ComposedContent write_merge(const MergePlan& mp, const std::vector<MergeInput>& inputs) {
  fb::FlatBufferBuilder builder(64 * 1024);
  std::vector<fb::Offset<fb::Table>> plans;
  for (const auto& [i, plan] : mp.plans) {
    plans.push_back(fb::Offset<fb::Table>(copy_plan(builder, mp, inputs, i, plan)));
  }
  Copier copier(builder, nullptr, nullptr, mp.inline_alignment);  // the program's own tables
  std::vector<Field> fields;
  if (mp.version) set_scalar(fields, kVersion, 4, *mp.version);
  set_offset(fields, kExecutionPlan, builder.CreateVector(plans).o);
  if (mp.inline_field) {
    std::vector<fb::Offset<fb::Table>> items;
    for (const ByteRange& range : mp.inline_data) {
      std::vector<uint8_t> bytes = range.file->read_range(range.offset, range.size);
      const auto data = copier.bytes(bytes.data(), bytes.size(), mp.inline_alignment);
      items.push_back(fb::Offset<fb::Table>(copier.table({{0, true, 4, 0, data}})));
    }
    set_offset(fields, kBackendDelegateData, builder.CreateVector(items).o);
  }
  std::vector<fb::Offset<fb::Table>> segments;
  for (const MergeSegment& s : mp.segments) {
    segments.push_back(fb::Offset<fb::Table>(
        copier.table({{0, false, 8, s.offset, 0}, {1, false, 8, s.size, 0}})));
  }
  set_offset(fields, kSegments, builder.CreateVector(segments).o);
  const auto offsets = builder.CreateVector(mp.constant_offsets).o;
  set_offset(fields, kConstantSegment,
                     copier.table({{0, false, 4, 0, 0}, {1, true, 4, 0, offsets}}));
  if (mp.state_segment || mp.mutable_field) {
    std::vector<fb::Offset<fb::Table>> subs;
    if (mp.state_segment) {
      const auto state = builder.CreateVector(mp.state_offsets).o;
      subs.push_back(fb::Offset<fb::Table>(
          copier.table({{0, false, 4, *mp.state_segment, 0}, {1, true, 4, 0, state}})));
    }
    set_offset(fields, kMutableDataSegments, builder.CreateVector(subs).o);
  }
  if (!mp.named_data.empty()) {
    std::vector<fb::Offset<fb::Table>> entries;
    for (const auto& [key, segment] : mp.named_data) {
      const auto k = copier.string(key);
      entries.push_back(
          fb::Offset<fb::Table>(copier.table({{0, true, 4, 0, k}, {1, false, 4, segment, 0}})));
    }
    set_offset(fields, kNamedData, builder.CreateVector(entries).o);
  }
  const auto root = copier.table(std::move(fields));
  builder.Finish(fb::Offset<fb::Table>(root), et::ProgramIdentifier());

  auto framed = frame(builder.GetBufferPointer(), builder.GetSize(), mp.inline_alignment,
                      mp.segment_alignment, mp.data_size);
  ComposedContent content;
  content.head = std::move(framed.head);
  content.size = mp.data_size == 0 ? content.head.size() : framed.base + mp.data_size;
  for (const MergeSegment& s : mp.segments) {
    for (const MergePiece& piece : s.pieces) {
      content.pieces.emplace_back(framed.base + s.offset + piece.at, piece.range);
    }
  }
  return content;
}

}  // namespace ptepack::pte::detail
