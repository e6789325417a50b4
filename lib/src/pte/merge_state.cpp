// Shared state of a merge (--share-state): named mutable buffers moved to memory id 2, one
// range per name, as ExecuTorch's MemoryPlanningPass(share_mutable_buffers=True) lays them out.
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "pte/merge_internal.h"
#include "pte/pte_frame.h"
#include "ptepack/base/error.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::pte::detail {
namespace {

namespace et = executorch_flatbuffer;

constexpr uint64_t kStateAlignment = 16;

uint64_t offset_of(const et::AllocationDetails& a) {
  return (uint64_t{a.memory_offset_high()} << 32) | a.memory_offset_low();
}

// Bytes a planned tensor takes (TensorInfo::nbytes counts stored bytes only).
uint64_t planned_bytes(const TensorInfo& t) {
  if (!t.known_type) return 0;
  return byte_size(t.dtype, t.shape).value_or(0);
}

// A named mutable buffer: a planned tensor with a fully qualified name that is
// not EXTERNAL (ExecuTorch names them with emit_mutable_buffer_names=True).
bool named_buffer(const TensorInfo& t) {
  return t.planned && !t.fqn.empty() && t.storage != Storage::external;
}

struct Slot {
  uint64_t offset = 0;
  const TensorInfo* first = nullptr;
  std::string first_method;
  std::optional<Digest> initial;
};

class StatePlanner {
 public:
  StatePlanner(MergePlan& plan, const std::vector<MergeInput>& inputs,
               const RangeDigests& digests)
      : plan_(plan), inputs_(inputs), digests_(digests) {}

  void run() {
    for (const auto& [i, p] : plan_.plans) check_method(i, p);
    for (const auto& [i, p] : plan_.plans) place(i, p);
    plan_.state_arena = align(arena_);
    for (const auto& [i, p] : plan_.plans) append_arena(i, p);
  }

  // The shared buffers' names, in arena order.
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::pair<uint64_t, std::string>> order;
    for (const auto& [name, slot] : slots_) order.emplace_back(slot.offset, quote(name));
    std::sort(order.begin(), order.end());
    std::vector<std::string> out;
    for (auto& entry : order) out.push_back(std::move(entry.second));
    return out;
  }

 private:
  std::string where(size_t i, uint32_t p) const {
    return fmt::format("{}: method {}", inputs_[i].name, quote(inputs_[i].program->plans[p]));
  }

  // Every planned tensor in memory id 1 on the CPU, every initialised buffer named.
  void check_method(size_t i, uint32_t p) const {
    const Program& program = *inputs_[i].program;
    const auto* ep = program.root()->execution_plan()->Get(p);
    if (const auto* devices = ep->non_const_buffer_device()) {
      for (const auto* d : *devices) {
        if (d->device_type() != et::DeviceType::CPU) {
          fail_input("{} plans buffer {} on {}: --share-state shares CPU memory only", where(i, p),
                     d->buffer_idx(), et::EnumNameDeviceType(d->device_type()));
        }
      }
    }
    for (const TensorInfo& t : program.tensors) {
      if (t.plan != p || !t.planned) continue;
      const auto* a = t.table->allocation_info();
      if (a->memory_id() != 1) {
        fail_input("{} value {} is planned in memory id {}: --share-state needs every planned "
                   "tensor in id 1 (the state moves to id 2)",
                   where(i, p), t.value, a->memory_id());
      }
      if (t.storage == Storage::mutable_state && t.fqn.empty()) {
        fail_input("{} value {} is a mutable buffer without a name: --share-state shares buffers "
                   "by name (export with ExecutorchBackendConfig(emit_mutable_buffer_names=True))",
                   where(i, p), t.value);
      }
    }
  }

  // The method's named buffers get their name's range in id 2; everything the
  // method keeps inside one of them (the write-back copy, in-place results) moves with it.
  void place(size_t i, uint32_t p) {
    const Program& program = *inputs_[i].program;
    std::vector<std::pair<const TensorInfo*, uint64_t>> ranges;  // buffer, its slot offset
    for (const TensorInfo& t : program.tensors) {
      if (t.plan != p || !named_buffer(t)) continue;
      ranges.emplace_back(&t, slot_for(i, p, t));
    }
    auto& moved = plan_.remaps[i].moved;
    for (const TensorInfo& t : program.tensors) {
      const uint64_t size = planned_bytes(t);
      if (t.plan != p || !t.planned || size == 0) continue;
      const uint64_t at = offset_of(*t.table->allocation_info());
      for (const auto& [buffer, slot] : ranges) {
        const uint64_t start = offset_of(*buffer->table->allocation_info());
        const uint64_t end = start + planned_bytes(*buffer);
        if (at >= end || at + size <= start) continue;
        if (at < start || at + size > end) {
          fail_input("{} value {} overlaps mutable buffer {} only in part: it cannot move with it",
                     where(i, p), t.value, quote(buffer->fqn));
        }
        moved[t.table->allocation_info()] = slot + (at - start);
      }
    }
  }

  uint64_t slot_for(size_t i, uint32_t p, const TensorInfo& t) {
    std::optional<Digest> initial;
    if (t.storage == Storage::mutable_state) initial = digests_.of(t.bytes);
    auto [it, fresh] = slots_.emplace(t.fqn, Slot{});
    Slot& slot = it->second;
    if (fresh) {
      slot = {align(arena_), &t, where(i, p), initial};
      arena_ = slot.offset + planned_bytes(t);
      return slot.offset;
    }
    const TensorInfo& f = *slot.first;
    if (f.dtype != t.dtype || f.shape != t.shape || slot.initial != initial) {
      fail(ErrorCode::conflict,
           "{}: mutable buffer {} is {} [{}]{} here and {} [{}]{} in {}: one shared state needs "
           "one dtype, shape and initial value",
           where(i, p), quote(t.fqn), dtype_name(t.dtype), fmt::join(t.shape, ", "),
           initial ? " with an initial value" : "", dtype_name(f.dtype), fmt::join(f.shape, ", "),
           slot.initial ? " with an initial value" : "", slot.first_method);
    }
    return slot.offset;
  }

  // non_const_buffer_sizes gains the arena as id 2 ([0] is reserved, [1] the method's own).
  void append_arena(size_t i, uint32_t p) {
    const auto* ep = inputs_[i].program->root()->execution_plan()->Get(p);
    std::vector<int64_t> sizes;
    if (const auto* old = ep->non_const_buffer_sizes()) sizes.assign(old->begin(), old->end());
    if (sizes.size() > 2) {
      fail_input("{} plans {} memory ids: --share-state needs the default ids 0 and 1",
                 where(i, p), sizes.size());
    }
    sizes.resize(2, 0);
    sizes.push_back(static_cast<int64_t>(plan_.state_arena));
    plan_.remaps[i].buffer_sizes[ep] = std::move(sizes);
  }

 private:
  static uint64_t align(uint64_t value) { return aligned(value, kStateAlignment); }

  MergePlan& plan_;
  const std::vector<MergeInput>& inputs_;
  const RangeDigests& digests_;
  std::map<std::string, Slot> slots_;
  uint64_t arena_ = 0;
};

}  // namespace

std::string plan_shared_state(MergePlan& plan, const std::vector<MergeInput>& inputs,
                              const RangeDigests& digests) {
  StatePlanner planner(plan, inputs, digests);
  planner.run();
  const auto names = planner.names();
  if (names.empty()) return "--share-state: no method has a named mutable buffer; nothing shared";
  return fmt::format("state shared: {} in a {}-byte arena, memory id 2 of every method: load "
                     "every method before running any (Module(..., share_memory_arenas=true))",
                     fmt::join(names, ", "), plan.state_arena);
}

std::vector<std::string> shareable_state(const MergePlan& plan,
                                         const std::vector<MergeInput>& inputs) {
  std::map<std::string, std::vector<std::string>> users;
  for (const auto& [i, p] : plan.plans) {
    const Program& program = *inputs[i].program;
    std::set<std::string> names;
    for (const TensorInfo& t : program.tensors) {
      if (t.plan == p && named_buffer(t)) names.insert(t.fqn);
    }
    for (const auto& name : names) users[name].push_back(plan.remaps[i].plan_names.at(p));
  }
  std::vector<std::string> out;
  for (const auto& [name, methods] : users) {
    if (methods.size() > 1) {
      out.push_back(fmt::format("methods {} each keep their own mutable buffer {}: "
                                "--share-state gives them one",
                                fmt::join(methods, ", "), quote(name)));
    }
  }
  return out;
}

}  // namespace ptepack::pte::detail
