// Execution plans compared as the runtime uses them: values, instructions, delegates, buffers.
#include "diff/plan_compare.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <optional>

#include "ptepack/base/error.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::detail {
namespace {

namespace fb = flatbuffers;
namespace et = executorch_flatbuffer;

template <typename T>
uint32_t count(const fb::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// A vector field as text: "(absent)", or its items (at most 16 shown).
template <typename T, typename Show>
std::string list_text(const fb::Vector<T>* v, Show show) {
  if (v == nullptr) return "(absent)";
  std::vector<std::string> items;
  for (uint32_t i = 0; i < v->size() && i < 16; ++i) items.push_back(show(v->Get(i)));
  if (v->size() > 16) items.push_back(fmt::format("… {} items", v->size()));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

template <typename T>
std::string list_text(const fb::Vector<T>* v) {
  return list_text(v, [](T x) { return fmt::format("{}", x); });
}

// Equal vectors of scalars, presence included (an absent vector is not an empty one).
template <typename T>
bool same_list(const fb::Vector<T>* x, const fb::Vector<T>* y) {
  if ((x == nullptr) != (y == nullptr)) return false;
  if (x == nullptr) return true;
  if (x->size() != y->size()) return false;
  for (uint32_t i = 0; i < x->size(); ++i) {
    if constexpr (std::is_same_v<T, double>) {  // bit for bit: NaN payloads and -0.0 count
      if (std::bit_cast<uint64_t>(x->Get(i)) != std::bit_cast<uint64_t>(y->Get(i))) return false;
    } else {
      if (x->Get(i) != y->Get(i)) return false;
    }
  }
  return true;
}

bool same_string(const fb::String* x, const fb::String* y) {
  if ((x == nullptr) != (y == nullptr)) return false;
  return x == nullptr || x->string_view() == y->string_view();
}

std::string string_text(const fb::String* s) {
  return s == nullptr ? std::string("(absent)") : quote(s->string_view());
}

std::string kind_name(et::KernelTypes type) {
  const std::string_view name = et::EnumNameKernelTypes(type);
  return name.empty() ? fmt::format("tag {}", static_cast<int>(type)) : std::string(name);
}

std::string scalar_type_text(et::ScalarType type) {
  const auto dtype = dtype_from_ptd(static_cast<int>(type));
  return dtype ? std::string(dtype_name(*dtype))
               : fmt::format("scalar type {}", static_cast<int>(type));
}

// How the runtime obtains a tensor's bytes, whatever the place they are stored.
enum class Bytes : uint8_t { none, constant, initial_state };

Bytes bytes_class(const pte::TensorInfo& t) {
  switch (t.storage) {
    case pte::Storage::none:
      return Bytes::none;
    case pte::Storage::mutable_state:
      return Bytes::initial_state;
    case pte::Storage::external:
      return t.planned ? Bytes::initial_state : Bytes::constant;
    default:
      return Bytes::constant;
  }
}

std::string_view bytes_class_name(Bytes c) {
  switch (c) {
    case Bytes::none:
      return "no stored bytes";
    case Bytes::constant:
      return "a constant";
    case Bytes::initial_state:
      return "planned memory with an initial value";
  }
  return "";
}

std::string allocation_text(const et::AllocationDetails* a) {
  if (a == nullptr) return "none";
  const uint64_t offset = (uint64_t{a->memory_offset_high()} << 32) | a->memory_offset_low();
  return fmt::format("memory_id {} offset {}", a->memory_id(), offset);
}

std::string device_text(const et::ExtraTensorInfo* e) {
  const auto type = e == nullptr ? et::DeviceType::CPU : e->device_type();
  const int index = e == nullptr ? 0 : e->device_index();
  const std::string_view name = et::EnumNameDeviceType(type);
  return fmt::format("{}:{}", name.empty() ? std::to_string(static_cast<int>(type)) : name, index);
}

// One side planned in memory id 1, the other in id 2: a buffer moved to the
// shared state (pack --share-state, ExecuTorch's share_mutable_buffers).
bool moved_to_shared_state(const et::AllocationDetails* a, const et::AllocationDetails* b) {
  return a != nullptr && b != nullptr && a->memory_id() != b->memory_id() &&
         (a->memory_id() == 2 || b->memory_id() == 2);
}

// `with` is `without` (ids 0 and 1, missing entries 0) plus the shared arena as id 2.
bool shared_arena_added(const fb::Vector<int64_t>* without, const fb::Vector<int64_t>* with) {
  if (with == nullptr || with->size() != 3) return false;
  for (uint32_t k = 0; k < 2; ++k) {
    const int64_t old = without != nullptr && k < without->size() ? without->Get(k) : 0;
    if (old != with->Get(k)) return false;
  }
  return without == nullptr || without->size() <= 2;
}

class PlanComparer {
 public:
  PlanComparer(const ProgramView& a, uint32_t pa, const ProgramView& b, uint32_t pb,
               Reporter& report)
      : a_(a),
        b_(b),
        pa_(pa),
        pb_(pb),
        x_(*a.program->root()->execution_plan()->Get(pa)),
        y_(*b.program->root()->execution_plan()->Get(pb)),
        report_(report) {}

  void run() {
    if (!same_list(x_.inputs(), y_.inputs())) {
      report_.add("plan",
                  fmt::format("inputs {} -> {}", list_text(x_.inputs()), list_text(y_.inputs())));
    }
    if (!same_list(x_.outputs(), y_.outputs())) {
      report_.add("plan", fmt::format("outputs {} -> {}", list_text(x_.outputs()),
                                      list_text(y_.outputs())));
    }
    container_metadata();
    values();
    chains();
    delegates();
    buffers();
  }

 private:
  void container_metadata() {
    const auto* m = x_.container_meta_type();
    const auto* n = y_.container_meta_type();
    if ((m == nullptr) != (n == nullptr)) {
      report_.add("plan", fmt::format("container_meta_type {} -> {}", m ? "present" : "absent",
                                      n ? "present" : "absent"));
      return;
    }
    if (m == nullptr) return;
    if (!same_string(m->encoded_inp_str(), n->encoded_inp_str()))
      report_.add("plan", "container_meta_type: encoded_inp_str changed (input structure)");
    if (!same_string(m->encoded_out_str(), n->encoded_out_str()))
      report_.add("plan", "container_meta_type: encoded_out_str changed (output structure)");
  }

  void values() {
    const uint32_t nx = count(x_.values());
    const uint32_t ny = count(y_.values());
    if (nx != ny) report_.add("value", fmt::format("values: {} -> {}", nx, ny));
    for (uint32_t v = 0; v < std::min(nx, ny); ++v) value(v);
  }

  void value(uint32_t v) {
    const auto& x = *x_.values()->Get(v);
    const auto& y = *y_.values()->Get(v);
    if (x.val_type() != y.val_type()) {
      report_.add("value", fmt::format("value {}: {} -> {}", v, kind_name(x.val_type()),
                                       kind_name(y.val_type())));
      return;
    }
    const std::string at = fmt::format("value {} {}", v, kind_name(x.val_type()));
    auto changed = [&](const std::string& from, const std::string& to) {
      report_.add("value", fmt::format("{}: {} -> {}", at, from, to));
    };
    switch (x.val_type()) {
      case et::KernelTypes::Int:
        if (x.val_as_Int()->int_val() != y.val_as_Int()->int_val())
          changed(std::to_string(x.val_as_Int()->int_val()),
                  std::to_string(y.val_as_Int()->int_val()));
        break;
      case et::KernelTypes::Bool:
        if (x.val_as_Bool()->bool_val() != y.val_as_Bool()->bool_val())
          changed(fmt::format("{}", x.val_as_Bool()->bool_val()),
                  fmt::format("{}", y.val_as_Bool()->bool_val()));
        break;
      case et::KernelTypes::Double: {
        const double dx = x.val_as_Double()->double_val();
        const double dy = y.val_as_Double()->double_val();
        if (std::bit_cast<uint64_t>(dx) != std::bit_cast<uint64_t>(dy))
          changed(fmt::format("{}", dx), fmt::format("{}", dy));
        break;
      }
      case et::KernelTypes::String:
        if (!same_string(x.val_as_String()->string_val(), y.val_as_String()->string_val()))
          changed(string_text(x.val_as_String()->string_val()),
                  string_text(y.val_as_String()->string_val()));
        break;
      case et::KernelTypes::IntList:
        compare_items(x.val_as_IntList()->items(), y.val_as_IntList()->items(), changed);
        break;
      case et::KernelTypes::DoubleList:
        compare_items(x.val_as_DoubleList()->items(), y.val_as_DoubleList()->items(), changed);
        break;
      case et::KernelTypes::BoolList:
        compare_items(x.val_as_BoolList()->items(), y.val_as_BoolList()->items(), changed);
        break;
      case et::KernelTypes::TensorList:
        compare_items(x.val_as_TensorList()->items(), y.val_as_TensorList()->items(), changed);
        break;
      case et::KernelTypes::OptionalTensorList:
        compare_items(x.val_as_OptionalTensorList()->items(),
                      y.val_as_OptionalTensorList()->items(), changed);
        break;
      case et::KernelTypes::Tensor:
        tensor(v);
        break;
      default:
        break;  // Null (no content) or NONE / unknown tags, which the reader refuses
    }
  }

  template <typename T, typename Changed>
  void compare_items(const fb::Vector<T>* x, const fb::Vector<T>* y, Changed& changed) {
    if (!same_list(x, y)) changed(list_text(x), list_text(y));
  }

  void tensor(uint32_t v) {
    const auto& ti = a_.program->tensors[a_.tensor_at.at({pa_, v})];
    const auto& ui = b_.program->tensors[b_.tensor_at.at({pb_, v})];
    const auto& t = *ti.table;
    const auto& u = *ui.table;
    std::vector<std::string> parts;
    if (t.scalar_type() != u.scalar_type()) {
      parts.push_back(fmt::format("dtype {} -> {}", scalar_type_text(t.scalar_type()),
                                  scalar_type_text(u.scalar_type())));
    }
    if (!same_list(t.sizes(), u.sizes()))
      parts.push_back(fmt::format("sizes {} -> {}", list_text(t.sizes()), list_text(u.sizes())));
    if (!same_list(t.dim_order(), u.dim_order())) {
      auto show = [](uint8_t d) { return std::to_string(d); };
      parts.push_back(fmt::format("dim_order {} -> {}", list_text(t.dim_order(), show),
                                  list_text(u.dim_order(), show)));
    }
    if (t.shape_dynamism() != u.shape_dynamism()) {
      parts.push_back(fmt::format("shape_dynamism {} -> {}",
                                  et::EnumNameTensorShapeDynamism(t.shape_dynamism()),
                                  et::EnumNameTensorShapeDynamism(u.shape_dynamism())));
    }
    if (t.requires_grad() != u.requires_grad())
      parts.push_back(fmt::format("requires_grad {} -> {}", t.requires_grad(), u.requires_grad()));
    if (t.layout() != u.layout())
      parts.push_back(fmt::format("layout {} -> {}", t.layout(), u.layout()));
    if (t.storage_offset() != u.storage_offset()) {
      parts.push_back(
          fmt::format("storage_offset {} -> {}", t.storage_offset(), u.storage_offset()));
    }
    const auto ta = allocation_text(t.allocation_info());
    const auto ua = allocation_text(u.allocation_info());
    if (ta != ua && report_.shared_state_as_notes &&
        moved_to_shared_state(t.allocation_info(), u.allocation_info())) {
      report_.note(fmt::format("value {} moved to the shared state: {} -> {}", v, ta, ua));
    } else if (ta != ua) {
      parts.push_back(fmt::format("memory planning {} -> {}", ta, ua));
    }
    const auto td = device_text(t.extra_tensor_info());
    const auto ud = device_text(u.extra_tensor_info());
    if (td != ud) parts.push_back(fmt::format("device {} -> {}", td, ud));
    const Bytes tc = bytes_class(ti);
    const Bytes uc = bytes_class(ui);
    if (tc != uc) {
      parts.push_back(fmt::format("{} -> {}", bytes_class_name(tc), bytes_class_name(uc)));
    } else if (tc != Bytes::none) {
      const auto& tx = a_.tensor_digest[a_.tensor_at.at({pa_, v})];
      const auto& ux = b_.tensor_digest[b_.tensor_at.at({pb_, v})];
      if (tx != ux) parts.emplace_back("bytes changed");
    }
    if (parts.empty()) return;
    report_.add("value", fmt::format("value {} {} [{}]: {}", v, scalar_type_text(u.scalar_type()),
                                     fmt::join(ui.shape, ", "), fmt::join(parts, "; ")));
  }

  // "aten::add.out": an operator as the runtime looks up its kernel.
  static std::string op_text(const et::ExecutionPlan& plan, int32_t index) {
    const auto* op = plan.operators()->Get(static_cast<uint32_t>(index));
    std::string text(op->name()->string_view());
    if (op->overload() == nullptr) return text + " (no overload field)";
    if (op->overload()->size() > 0) text += "." + op->overload()->str();
    return text;
  }

  // What an instruction does, and its value arguments, as text.
  static std::pair<std::string, std::string> instruction_text(const et::ExecutionPlan& plan,
                                                              const et::Instruction& ins) {
    switch (ins.instr_args_type()) {
      case et::InstructionArguments::KernelCall: {
        const auto* k = ins.instr_args_as_KernelCall();
        return {op_text(plan, k->op_index()), list_text(k->args())};
      }
      case et::InstructionArguments::DelegateCall: {
        const auto* d = ins.instr_args_as_DelegateCall();
        return {fmt::format("delegate {}", d->delegate_index()), list_text(d->args())};
      }
      case et::InstructionArguments::MoveCall: {
        const auto* m = ins.instr_args_as_MoveCall();
        return {"move", fmt::format("value {} -> value {}", m->move_from(), m->move_to())};
      }
      case et::InstructionArguments::JumpFalseCall: {
        const auto* j = ins.instr_args_as_JumpFalseCall();
        return {"jump_false", fmt::format("to instruction {} unless value {}",
                                          j->destination_instruction(), j->cond_value_index())};
      }
      case et::InstructionArguments::FreeCall:
        return {"free", fmt::format("value {}", ins.instr_args_as_FreeCall()->value_index())};
      default:
        return {fmt::format("instruction tag {}", static_cast<int>(ins.instr_args_type())), ""};
    }
  }

  void chains() {
    const uint32_t nx = count(x_.chains());
    const uint32_t ny = count(y_.chains());
    if (nx != ny) report_.add("chain", fmt::format("chains: {} -> {}", nx, ny));
    for (uint32_t c = 0; c < std::min(nx, ny); ++c) {
      const auto& x = *x_.chains()->Get(c);
      const auto& y = *y_.chains()->Get(c);
      const std::string at = ny > 1 ? fmt::format("chain {} ", c) : std::string();
      if (!same_list(x.inputs(), y.inputs())) {
        report_.add("chain", fmt::format("{}inputs {} -> {}", at, list_text(x.inputs()),
                                         list_text(y.inputs())));
      }
      if (!same_list(x.outputs(), y.outputs())) {
        report_.add("chain", fmt::format("{}outputs {} -> {}", at, list_text(x.outputs()),
                                         list_text(y.outputs())));
      }
      const uint32_t ix = count(x.instructions());
      const uint32_t iy = count(y.instructions());
      if (ix != iy) report_.add("chain", fmt::format("{}instructions: {} -> {}", at, ix, iy));
      for (uint32_t i = 0; i < std::min(ix, iy); ++i) {
        const auto [op_x, args_x] = instruction_text(x_, *x.instructions()->Get(i));
        const auto [op_y, args_y] = instruction_text(y_, *y.instructions()->Get(i));
        if (op_x != op_y) {
          report_.add(
              "instruction",
              fmt::format("{}instruction {} {} -> {}{}", at, i, op_x, op_y,
                          args_x == args_y ? std::string()
                                           : fmt::format("; arguments {} -> {}", args_x, args_y)));
        } else if (args_x != args_y) {
          report_.add("instruction",
                      fmt::format("{}instruction {} {}: {} -> {}", at, i, op_x, args_x, args_y));
        }
      }
    }
  }

  void delegates() {
    const uint32_t nx = count(x_.delegates());
    const uint32_t ny = count(y_.delegates());
    if (nx != ny) report_.add("delegate", fmt::format("delegates: {} -> {}", nx, ny));
    for (uint32_t d = 0; d < std::min(nx, ny); ++d) {
      const auto& x = *x_.delegates()->Get(d);
      const auto& y = *y_.delegates()->Get(d);
      const std::string at = fmt::format("delegate {} {}", d, escaped(y.id()->string_view()));
      if (x.id()->string_view() != y.id()->string_view()) {
        report_.add("delegate",
                    fmt::format("delegate {}: id {} -> {}", d, quote(x.id()->string_view()),
                                quote(y.id()->string_view())));
      }
      const uint32_t sx = count(x.compile_specs());
      const uint32_t sy = count(y.compile_specs());
      if (sx != sy) report_.add("delegate", fmt::format("{}: compile specs: {} -> {}", at, sx, sy));
      for (uint32_t s = 0; s < std::min(sx, sy); ++s) {
        const auto& cx = *x.compile_specs()->Get(s);
        const auto& cy = *y.compile_specs()->Get(s);
        if (!same_string(cx.key(), cy.key())) {
          report_.add("delegate", fmt::format("{}: compile spec {} key {} -> {}", at, s,
                                              string_text(cx.key()), string_text(cy.key())));
        } else if (!same_list(cx.value(), cy.value())) {
          report_.add("delegate",
                      fmt::format("{}: compile spec {} {} value changed ({} -> {} B)", at, s,
                                  string_text(cy.key()), grouped(count(cx.value())),
                                  grouped(count(cy.value()))));
        }
      }
      const auto& bx = a_.delegate_blob.at({pa_, d});
      const auto& by = b_.delegate_blob.at({pb_, d});
      if (bx.first != by.first) {
        report_.add("delegate", bx.second == by.second
                                    ? fmt::format("{} blob changed, {} B", at, grouped(by.second))
                                    : fmt::format("{} blob changed, {} -> {} B", at,
                                                  grouped(bx.second), grouped(by.second)));
      }
    }
  }

  void buffers() {
    const auto* sx = x_.non_const_buffer_sizes();
    const auto* sy = y_.non_const_buffer_sizes();
    if (report_.shared_state_as_notes &&
        (shared_arena_added(sx, sy) || shared_arena_added(sy, sx))) {
      report_.note(fmt::format("non_const_buffer_sizes {} -> {}: the shared state arena "
                               "(memory id 2)", list_text(sx), list_text(sy)));
    } else if (!same_list(sx, sy)) {
      report_.add("plan", fmt::format("non_const_buffer_sizes {} -> {}",
                                      list_text(x_.non_const_buffer_sizes()),
                                      list_text(y_.non_const_buffer_sizes())));
    }
    auto devices = [](const et::ExecutionPlan& plan) {
      const auto* v = plan.non_const_buffer_device();
      if (v == nullptr) return std::string("(absent)");
      std::vector<std::string> items;
      for (uint32_t i = 0; i < v->size(); ++i) {
        const auto* d = v->Get(i);
        const std::string_view type = et::EnumNameDeviceType(d->device_type());
        items.push_back(
            fmt::format("buffer {} on {}:{}", d->buffer_idx(),
                        type.empty() ? std::to_string(static_cast<int>(d->device_type())) : type,
                        d->device_index()));
      }
      return fmt::format("[{}]", fmt::join(items, ", "));
    };
    const auto dx = devices(x_);
    const auto dy = devices(y_);
    if (dx != dy) report_.add("plan", fmt::format("non_const_buffer_device {} -> {}", dx, dy));
  }

  const ProgramView& a_;
  const ProgramView& b_;
  uint32_t pa_;
  uint32_t pb_;
  const et::ExecutionPlan& x_;
  const et::ExecutionPlan& y_;
  Reporter& report_;
};

}  // namespace

void Reporter::add(std::string_view what, std::string text) {
  ++found_;
  if (diff_.differences.size() >= ArtifactDiff::kMaxDifferences) {
    ++diff_.differences_omitted;
    return;
  }
  diff_.differences.push_back({program_, method_, std::string(what), std::move(text)});
}

void Reporter::note(const std::string& text) {
  diff_.notes.push_back(fmt::format("{}{}{}: {}", program_, method_.empty() ? "" : " ",
                                    method_, text));
}

void compare_plans(const ProgramView& a, uint32_t pa, const ProgramView& b, uint32_t pb,
                   Reporter& report) {
  PlanComparer(a, pa, b, pb, report).run();
}

std::string grouped(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace ptepack::detail
