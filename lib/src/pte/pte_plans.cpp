// Execution plans of a .pte: index checks, delegates, and where each Tensor value's bytes live.
#include <fmt/ranges.h>

#include "pte/pte_plans.h"
#include "base/checked.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::pte::detail {
namespace {

namespace fb = flatbuffers;
namespace et = executorch_flatbuffer;

template <typename T>
uint32_t count(const fb::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// Checks and records everything of one execution plan.
struct PlanReader {
  const std::string& name;
  Program& out;
  const et::Program& root;
  uint32_t plan;
  const et::ExecutionPlan& ep;
  std::string where;

  void index(int64_t value, uint32_t size, std::string_view field, bool allow_none = false) const {
    if (allow_none && value == -1) return;
    if (value < 0 || value >= size) {
      fail_input("{}: {}.{}: index {} is out of range ({} entries)", name, where, field, value,
                 size);
    }
  }
  void indices(const fb::Vector<int32_t>* v, uint32_t size, std::string_view field,
               bool allow_none = false) const {
    for (uint32_t k = 0; k < count(v); ++k) index(v->Get(k), size, field, allow_none);
  }

  void run() {
    const uint32_t values = count(ep.values());
    indices(ep.inputs(), values, "inputs");
    indices(ep.outputs(), values, "outputs");
    for (uint32_t c = 0; c < count(ep.chains()); ++c) chain(*ep.chains()->Get(c), c, values);
    for (uint32_t v = 0; v < values; ++v) value(*ep.values()->Get(v), v, values);
    for (uint32_t d = 0; d < count(ep.delegates()); ++d) delegate(*ep.delegates()->Get(d), d);
    for (uint32_t o = 0; o < count(ep.operators()); ++o) {
      if (ep.operators()->Get(o)->name() == nullptr) {
        fail_input("{}: {}.operators[{}] has no name", name, where, o);
      }
    }
  }

  void chain(const et::Chain& chain, uint32_t c, uint32_t values) const {
    const std::string at = fmt::format("chains[{}]", c);
    indices(chain.inputs(), values, at + ".inputs");
    indices(chain.outputs(), values, at + ".outputs");
    const uint32_t n = count(chain.instructions());
    for (uint32_t i = 0; i < n; ++i) {
      const auto* ins = chain.instructions()->Get(i);
      const std::string f = fmt::format("{}.instructions[{}]", at, i);
      // The verifier accepts a union tag without its table.
      if (ins->instr_args_type() != et::InstructionArguments::NONE &&
          ins->instr_args() == nullptr) {
        fail_input("{}: {}.{}: instr_args_type {} without instr_args", name, where, f,
                   static_cast<int>(ins->instr_args_type()));
      }
      switch (ins->instr_args_type()) {
        case et::InstructionArguments::KernelCall: {
          const auto* k = ins->instr_args_as_KernelCall();
          index(k->op_index(), count(ep.operators()), f + ".op_index");
          indices(k->args(), values, f + ".args");
          break;
        }
        case et::InstructionArguments::DelegateCall: {
          const auto* d = ins->instr_args_as_DelegateCall();
          index(d->delegate_index(), count(ep.delegates()), f + ".delegate_index");
          indices(d->args(), values, f + ".args");
          break;
        }
        case et::InstructionArguments::MoveCall: {
          const auto* m = ins->instr_args_as_MoveCall();
          index(m->move_from(), values, f + ".move_from");
          index(m->move_to(), values, f + ".move_to");
          break;
        }
        case et::InstructionArguments::JumpFalseCall: {
          const auto* j = ins->instr_args_as_JumpFalseCall();
          index(j->cond_value_index(), values, f + ".cond_value_index");
          index(j->destination_instruction(), n, f + ".destination_instruction");
          break;
        }
        case et::InstructionArguments::FreeCall:
          index(ins->instr_args_as_FreeCall()->value_index(), values, f + ".value_index");
          break;
        default:
          break;  // NONE or an unknown tag (recorded as not rewritable)
      }
    }
  }

  void delegate(const et::BackendDelegate& d, uint32_t i) {
    const std::string at = fmt::format("delegates[{}]", i);
    if (d.id() == nullptr) fail_input("{}: {}.{} has no id", name, where, at);
    if (d.processed() == nullptr) fail_input("{}: {}.{} has no processed data", name, where, at);
    Delegate info{plan, d.id()->str(), d.processed()->location() == et::DataLocation::INLINE,
                  d.processed()->index(), 0, {}};
    if (info.inline_data) {
      index(info.index, count(root.backend_delegate_data()), at + ".processed.index");
      const auto* data = root.backend_delegate_data()->Get(info.index)->data();
      info.size = count(data);
      info.bytes = {out.file, 0, info.size};
      if (data != nullptr)
        info.bytes.offset = static_cast<uint64_t>(data->Data() - out.flatbuffer.data());
    } else {
      index(info.index, static_cast<uint32_t>(out.segments.size()), at + ".processed.index");
      info.size = out.segments[info.index].size;
      info.bytes = {out.file, out.segments[info.index].offset, info.size};
    }
    out.delegates.push_back(std::move(info));
  }

  void value(const et::EValue& v, uint32_t i, uint32_t values) {
    const std::string at = fmt::format("values[{}]", i);
    // The verifier accepts a union tag without its table; the runtime refuses
    // every value but Null without one ("Null value at index").
    if (v.val_type() != et::KernelTypes::Null && v.val() == nullptr) {
      const std::string_view known = et::EnumNameKernelTypes(v.val_type());
      fail_input("{}: {}.{}: val_type {} without val (the runtime refuses it)", name, where, at,
                 known.empty() ? std::to_string(static_cast<int>(v.val_type())) : known);
    }
    if (const auto* list = v.val_as_TensorList()) indices(list->items(), values, at + ".items");
    if (const auto* list = v.val_as_OptionalTensorList()) {
      indices(list->items(), values, at + ".items", true);
    }
    if (const auto* t = v.val_as_Tensor()) tensor(*t, i, at);
  }

  void tensor(const et::Tensor& t, uint32_t value, const std::string& at) {
    TensorInfo info;
    info.plan = plan;
    info.value = value;
    info.table = &t;
    info.scalar_type = static_cast<int>(t.scalar_type());
    auto dtype = dtype_from_ptd(info.scalar_type);
    info.known_type = dtype.has_value();
    info.dtype = dtype.value_or(DType::BYTE);
    const auto* sizes = t.sizes();
    if (count(sizes) > Limits::max_rank) {
      fail_input("{}: {}.{}: rank {} exceeds the limit {}", name, where, at, count(sizes),
                 Limits::max_rank);
    }
    for (uint32_t d = 0; d < count(sizes); ++d) {
      if (sizes->Get(d) < 0) {
        fail_input("{}: {}.{}.sizes[{}] = {} is negative", name, where, at, d, sizes->Get(d));
      }
      info.shape.push_back(sizes->Get(d));
    }
    if (const auto* order = t.dim_order()) {
      std::vector<bool> seen(info.shape.size(), false);
      bool ok = order->size() == info.shape.size();
      for (uint32_t d = 0; ok && d < order->size(); ++d) {
        const uint8_t o = order->Get(d);
        ok = o < seen.size() && !seen[o];
        if (ok) seen[o] = true;
        info.dim_order.push_back(o);
      }
      if (!ok) {
        fail_input("{}: {}.{}.dim_order [{}] is not a permutation of {} dimensions", name, where,
                   at, fmt::join(*order, ", "), info.shape.size());
      }
    }
    info.buffer_index = t.data_buffer_idx();
    info.planned = t.allocation_info() != nullptr;
    const auto* extra = t.extra_tensor_info();
    if (extra != nullptr && extra->fully_qualified_name() != nullptr) {
      info.fqn = extra->fully_qualified_name()->str();
    }
    if (extra != nullptr && extra->location() == et::TensorDataLocation::EXTERNAL) {
      info.storage = Storage::external;
      if (info.fqn.empty()) {
        fail_input("{}: {}.{}: EXTERNAL tensor without a fully_qualified_name", name, where, at);
      }
      check_name(info.fqn, "fully_qualified_name", fmt::format("{}: {}.{}", name, where, at));
    } else if (info.buffer_index > 0) {
      info.storage =
          info.planned ? Storage::mutable_state
          : count(root.constant_buffer()) > 0 && (root.constant_segment() == nullptr ||
                                                  count(root.constant_segment()->offsets()) == 0)
              ? Storage::constant_buffer
              : Storage::constant_segment;
    }
    if (info.storage != Storage::none && info.storage != Storage::external) {
      auto n = info.known_type ? byte_size(info.dtype, info.shape) : std::nullopt;
      if (!n) {
        fail_input("{}: {}.{}: cannot size a stored tensor of scalar type {} and shape [{}]", name,
                   where, at, info.scalar_type, fmt::join(info.shape, ", "));
      }
      info.nbytes = *n;
      locate(info, extra, at);
    }
    out.tensors.push_back(std::move(info));
  }

  // Finds a stored tensor's bytes and checks they lie inside their segment or buffer.
  void locate(TensorInfo& info, const et::ExtraTensorInfo* extra, const std::string& at) const {
    const auto& segments = out.segments;
    const et::SubsegmentOffsets* sub = nullptr;
    std::string table = "constant_segment";
    if (info.storage == Storage::constant_buffer) {
      const auto* buffers = root.constant_buffer();
      index(info.buffer_index, count(buffers), at + ".data_buffer_idx");
      const auto* storage = buffers->Get(info.buffer_index)->storage();
      if (storage == nullptr && info.nbytes == 0) {
        info.bytes = ByteRange{out.file, 0, 0};
        return;
      }
      if (count(storage) < info.nbytes) {
        fail_input("{}: {}.{}: {} bytes but constant_buffer[{}] holds {}", name, where, at,
                   info.nbytes, info.buffer_index, count(storage));
      }
      auto offset = static_cast<uint64_t>(storage->Data() - out.flatbuffer.data());
      info.bytes = ByteRange{out.file, offset, info.nbytes};
      return;
    }
    if (info.storage == Storage::mutable_state) {
      const uint64_t which = extra != nullptr ? extra->mutable_data_segments_idx() : 0;
      if (which >= count(root.mutable_data_segments())) {
        fail_input("{}: {}.{}: mutable_data_segments_idx {} is out of range ({} entries)", name,
                   where, at, which, count(root.mutable_data_segments()));
      }
      sub = root.mutable_data_segments()->Get(static_cast<uint32_t>(which));
      table = fmt::format("mutable_data_segments[{}]", which);
    } else {
      sub = root.constant_segment();
    }
    const uint32_t offsets = sub == nullptr ? 0 : count(sub->offsets());
    if (info.buffer_index >= offsets) {
      fail_input("{}: {}.{}: data_buffer_idx {} is out of range ({}.offsets has {})", name, where,
                 at, info.buffer_index, table, offsets);
    }
    const Segment& segment = segments[sub->segment_index()];  // checked by read()
    const uint64_t offset = sub->offsets()->Get(info.buffer_index);
    if (!range_within(offset, info.nbytes, segment.size)) {
      fail_input("{}: {}.{}: {} bytes at offset {} run past {} (segment {} of {} bytes)", name,
                 where, at, info.nbytes, offset, table, sub->segment_index(), segment.size);
    }
    info.bytes = ByteRange{out.file, segment.offset + offset, info.nbytes};
  }
};

}  // namespace

void read_plan(const std::string& name, Program& out, const et::Program& root, uint32_t plan) {
  const auto& ep = *root.execution_plan()->Get(plan);
  PlanReader reader{name, out, root, plan, ep, fmt::format("execution_plan[{}]", plan)};
  reader.run();
}

}  // namespace ptepack::pte::detail
