// Execution plans compared as the runtime uses them: values, instructions, delegates, buffers.
#include "diff/plan_compare.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "diff/plan_align.h"
#include "diff/plan_text.h"
#include "ptepack/base/error.h"

namespace ptepack::detail {
namespace {

namespace fb = flatbuffers;
namespace et = executorch_flatbuffer;

// How the runtime obtains a tensor's bytes, whatever the place they are stored.
enum class ValueBytes : uint8_t { none, constant, initial_state };

ValueBytes bytes_class(const pte::TensorInfo& t) {
  switch (t.storage) {
    case pte::Storage::none:
      return ValueBytes::none;
    case pte::Storage::mutable_state:
      return ValueBytes::initial_state;
    case pte::Storage::external:
      return t.planned ? ValueBytes::initial_state : ValueBytes::constant;
    default:
      return ValueBytes::constant;
  }
}

std::string_view bytes_class_name(ValueBytes c) {
  switch (c) {
    case ValueBytes::none:
      return "no stored bytes";
    case ValueBytes::constant:
      return "a constant";
    case ValueBytes::initial_state:
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
  PlanComparer(const PlanPair& p, Reporter& report) : p_(p), report_(report) {}

  void run() {
    align_ = align_plans(p_);
    value_list(DifferenceKind::plan, "", "inputs", p_.x.inputs(), p_.y.inputs());
    value_list(DifferenceKind::plan, "", "outputs", p_.x.outputs(), p_.y.outputs());
    container_metadata();
    values();
    chains();
    delegates();
    buffers();
  }

 private:
  // "271" when a value keeps its index, "271 -> 272" when it moved.
  static std::string pair_label(uint32_t a, uint32_t b) {
    return a == b ? std::to_string(a) : fmt::format("{} -> {}", a, b);
  }

  // A's list of values in B's terms equals B's list (presence included).
  template <typename T>
  bool same_values(const fb::Vector<T>* x, const fb::Vector<T>* y) const {
    if ((x == nullptr) != (y == nullptr)) return false;
    if (x == nullptr) return true;
    if (x->size() != y->size()) return false;
    for (uint32_t i = 0; i < x->size(); ++i) {
      const auto v = static_cast<int32_t>(x->Get(i));
      const auto w = static_cast<int32_t>(y->Get(i));
      if (!same_value(v, w)) return false;
    }
    return true;
  }

  template <typename T>
  void value_list(DifferenceKind what, const std::string& at, std::string_view name,
                  const fb::Vector<T>* x, const fb::Vector<T>* y) {
    if (same_values(x, y)) return;
    report_.add(what, fmt::format("{}{} {} -> {}", at, name, list_text(x), list_text(y)));
  }

  void container_metadata() {
    const auto* m = p_.x.container_meta_type();
    const auto* n = p_.y.container_meta_type();
    if ((m == nullptr) != (n == nullptr)) {
      report_.add(DifferenceKind::plan,
                  fmt::format("container_meta_type {} -> {}", m ? "present" : "absent",
                              n ? "present" : "absent"));
      return;
    }
    if (m == nullptr) return;
    if (!same_string(m->encoded_inp_str(), n->encoded_inp_str()))
      report_.add(DifferenceKind::plan,
                  "container_meta_type: encoded_inp_str changed (input structure)");
    if (!same_string(m->encoded_out_str(), n->encoded_out_str()))
      report_.add(DifferenceKind::plan,
                  "container_meta_type: encoded_out_str changed (output structure)");
  }

  void values() {
    const auto& in_b = align_.value_in_b;
    const auto& in_a = align_.value_in_a;
    uint32_t crossed = 0;
    std::optional<std::pair<uint32_t, uint32_t>> first;
    std::optional<uint32_t> last;
    for (uint32_t v = 0; v < in_b.size(); ++v) {
      if (!in_b[v]) {
        report_.add(
            DifferenceKind::value,
            fmt::format("value {} removed ({})", v, value_summary(p_.x, static_cast<int32_t>(v))));
        continue;
      }
      value(v, *in_b[v]);
      if (last && *in_b[v] < *last) {
        ++crossed;
        if (!first) first = std::make_pair(v, *in_b[v]);
      }
      last = std::max(last.value_or(0), *in_b[v]);
    }
    for (uint32_t w = 0; w < in_a.size(); ++w) {
      if (!in_a[w]) {
        report_.add(
            DifferenceKind::value,
            fmt::format("value {} added ({})", w, value_summary(p_.y, static_cast<int32_t>(w))));
      }
    }
    if (crossed > 0) {
      report_.add(DifferenceKind::value,
                  fmt::format("values reordered: {} before values they followed "
                              "(first: value {})",
                              crossed, pair_label(first->first, first->second)));
    }
  }

  void value(uint32_t va, uint32_t vb) {
    const auto& x = *p_.x.values()->Get(va);
    const auto& y = *p_.y.values()->Get(vb);
    const std::string at = fmt::format("value {} {}", pair_label(va, vb), kind_name(x.val_type()));
    auto changed = [&](const std::string& from, const std::string& to) {
      report_.add(DifferenceKind::value, fmt::format("{}: {} -> {}", at, from, to));
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
        value_list(DifferenceKind::value, at, "items", x.val_as_TensorList()->items(),
                   y.val_as_TensorList()->items());
        break;
      case et::KernelTypes::OptionalTensorList:
        value_list(DifferenceKind::value, at, "items", x.val_as_OptionalTensorList()->items(),
                   y.val_as_OptionalTensorList()->items());
        break;
      case et::KernelTypes::Tensor:
        tensor(va, vb);
        break;
      default:
        break;  // Null (no content) or NONE / unknown tags, which the reader refuses
    }
  }

  template <typename T, typename Changed>
  void compare_items(const fb::Vector<T>* x, const fb::Vector<T>* y, Changed& changed) {
    if (!same_list(x, y)) changed(list_text(x), list_text(y));
  }

  void tensor(uint32_t va, uint32_t vb) {
    const size_t ia = p_.a.tensor_at.at({p_.pa, va});
    const size_t ib = p_.b.tensor_at.at({p_.pb, vb});
    const auto& ti = p_.a.program->tensors[ia];
    const auto& ui = p_.b.program->tensors[ib];
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
      report_.note(fmt::format("value {} moved to the shared state: {} -> {}",
                               pair_label(va, vb), ta, ua));
    } else if (ta != ua) {
      parts.push_back(fmt::format("memory planning {} -> {}", ta, ua));
    }
    const auto td = device_text(t.extra_tensor_info());
    const auto ud = device_text(u.extra_tensor_info());
    if (td != ud) parts.push_back(fmt::format("device {} -> {}", td, ud));
    const ValueBytes tc = bytes_class(ti);
    const ValueBytes uc = bytes_class(ui);
    if (tc != uc) {
      parts.push_back(fmt::format("{} -> {}", bytes_class_name(tc), bytes_class_name(uc)));
    } else if (tc != ValueBytes::none) {
      if (p_.a.tensor_digest[ia] != p_.b.tensor_digest[ib]) parts.emplace_back("bytes changed");
    }
    if (parts.empty()) return;
    report_.add(
        DifferenceKind::value,
        fmt::format("value {} {} [{}]: {}", pair_label(va, vb), scalar_type_text(u.scalar_type()),
                    fmt::join(ui.shape, ", "), fmt::join(parts, "; ")));
  }

  void chains() {
    const uint32_t nx = count(p_.x.chains());
    const uint32_t ny = count(p_.y.chains());
    if (nx != ny) report_.add(DifferenceKind::chain, fmt::format("chains: {} -> {}", nx, ny));
    for (uint32_t c = 0; c < std::min(nx, ny); ++c) {
      const auto& x = *p_.x.chains()->Get(c);
      const auto& y = *p_.y.chains()->Get(c);
      const std::string at = ny > 1 ? fmt::format("chain {} ", c) : std::string();
      value_list(DifferenceKind::chain, at, "inputs", x.inputs(), y.inputs());
      value_list(DifferenceKind::chain, at, "outputs", x.outputs(), y.outputs());
      for (const auto& step : align_.chains[c]) {
        if (step.a && step.b) {
          instruction(c, *step.a, *step.b, at);
        } else if (step.a) {
          report_.add(DifferenceKind::instruction,
                      fmt::format("{}instruction {} {} removed", at, *step.a,
                                  instruction_key(p_.x, c, *step.a)));
        } else {
          report_.add(DifferenceKind::instruction,
                      fmt::format("{}instruction {} {} added ({})", at, *step.b,
                                  instruction_key(p_.y, c, *step.b),
                                  fmt::join(instruction_values(p_.y, c, *step.b), ", ")));
        }
      }
    }
  }

  // Two instructions of one operator: arguments lined up by kind, each pair
  // compared in B's terms; a jump's destination through the instruction pairs.
  void instruction(uint32_t c, uint32_t i, uint32_t j, const std::string& at) {
    const auto xs = instruction_values(p_.x, c, i);
    const auto ys = instruction_values(p_.y, c, j);
    std::vector<std::string> parts;
    for (const auto& s : align_by_kind(p_, xs, ys)) {
      if (!s.b) {
        parts.push_back(
            fmt::format("argument {} removed ({})", *s.a, value_summary(p_.x, xs[*s.a])));
      } else if (!s.a) {
        parts.push_back(fmt::format("argument {} added ({})", *s.b, value_summary(p_.y, ys[*s.b])));
      } else if (!same_value(xs[*s.a], ys[*s.b])) {
        parts.push_back(fmt::format("argument {}: value {} -> {}", *s.b, in_b_terms(xs[*s.a]),
                                    ys[*s.b]));
      }
    }
    const auto* jx = p_.x.chains()->Get(c)->instructions()->Get(i)->instr_args_as_JumpFalseCall();
    const auto* jy = p_.y.chains()->Get(c)->instructions()->Get(j)->instr_args_as_JumpFalseCall();
    if (jx != nullptr && jy != nullptr) {
      const auto& in_b = align_.instruction_in_b[c];
      const auto to = static_cast<size_t>(jx->destination_instruction());
      const bool same = to < in_b.size() && in_b[to].has_value() &&
                        *in_b[to] == static_cast<uint32_t>(jy->destination_instruction());
      if (!same) {
        parts.push_back(fmt::format("destination {} -> {}", jx->destination_instruction(),
                                    jy->destination_instruction()));
      }
    }
    const auto key_x = instruction_key(p_.x, c, i);
    const auto key_y = instruction_key(p_.y, c, j);
    if (key_x != key_y) {  // replaced: another operator in its place
      report_.add(DifferenceKind::instruction,
                  fmt::format("{}instruction {} {} -> {}{}", at, pair_label(i, j), key_x, key_y,
                              parts.empty() ? "" : fmt::format("; {}", fmt::join(parts, "; "))));
    } else if (!parts.empty()) {
      report_.add(DifferenceKind::instruction,
                  fmt::format("{}instruction {} {}: {}", at, pair_label(i, j), key_y,
                              fmt::join(parts, "; ")));
    }
  }

  // Value `v` of A as B numbers it: "12", or "7 of A (removed)" without a counterpart.
  [[nodiscard]] std::string in_b_terms(int32_t v) const {
    const auto at = static_cast<size_t>(v);
    if (v < 0 || at >= align_.value_in_b.size()) return std::to_string(v);
    const auto& w = align_.value_in_b[at];
    return w ? std::to_string(*w) : fmt::format("{} of A (removed)", v);
  }

  // Value `v` of A is value `w` of B (-1, no value, only as -1).
  [[nodiscard]] bool same_value(int32_t v, int32_t w) const {
    if (v < 0 || w < 0) return v == w;
    const auto& in_b = align_.value_in_b;
    const auto at = static_cast<size_t>(v);
    return at < in_b.size() && in_b[at].has_value() && *in_b[at] == static_cast<uint32_t>(w);
  }

  void delegates() {
    const uint32_t nx = count(p_.x.delegates());
    const uint32_t ny = count(p_.y.delegates());
    if (nx != ny) report_.add(DifferenceKind::delegate, fmt::format("delegates: {} -> {}", nx, ny));
    for (uint32_t d = 0; d < std::min(nx, ny); ++d) {
      const auto& x = *p_.x.delegates()->Get(d);
      const auto& y = *p_.y.delegates()->Get(d);
      const std::string at = fmt::format("delegate {} {}", d, escaped(y.id()->string_view()));
      if (x.id()->string_view() != y.id()->string_view()) {
        report_.add(DifferenceKind::delegate,
                    fmt::format("delegate {}: id {} -> {}", d, quote(x.id()->string_view()),
                                quote(y.id()->string_view())));
      }
      const uint32_t sx = count(x.compile_specs());
      const uint32_t sy = count(y.compile_specs());
      if (sx != sy)
        report_.add(DifferenceKind::delegate,
                    fmt::format("{}: compile specs: {} -> {}", at, sx, sy));
      for (uint32_t s = 0; s < std::min(sx, sy); ++s) {
        const auto& cx = *x.compile_specs()->Get(s);
        const auto& cy = *y.compile_specs()->Get(s);
        if (!same_string(cx.key(), cy.key())) {
          report_.add(DifferenceKind::delegate,
                      fmt::format("{}: compile spec {} key {} -> {}", at, s, string_text(cx.key()),
                                  string_text(cy.key())));
        } else if (!same_list(cx.value(), cy.value())) {
          report_.add(DifferenceKind::delegate,
                      fmt::format("{}: compile spec {} {} value changed ({} -> {} B)", at, s,
                                  string_text(cy.key()), grouped(count(cx.value())),
                                  grouped(count(cy.value()))));
        }
      }
      const auto& bx = p_.a.delegate_blob.at({p_.pa, d});
      const auto& by = p_.b.delegate_blob.at({p_.pb, d});
      if (bx.first != by.first) {
        report_.add(DifferenceKind::delegate,
                    bx.second == by.second
                        ? fmt::format("{} blob changed, {} B", at, grouped(by.second))
                        : fmt::format("{} blob changed, {} -> {} B", at, grouped(bx.second),
                                      grouped(by.second)));
      }
    }
  }

  void buffers() {
    const auto* sx = p_.x.non_const_buffer_sizes();
    const auto* sy = p_.y.non_const_buffer_sizes();
    if (report_.shared_state_as_notes &&
        (shared_arena_added(sx, sy) || shared_arena_added(sy, sx))) {
      report_.note(fmt::format("non_const_buffer_sizes {} -> {}: the shared state arena "
                               "(memory id 2)", list_text(sx), list_text(sy)));
    } else if (!same_list(sx, sy)) {
      report_.add(DifferenceKind::plan, fmt::format("non_const_buffer_sizes {} -> {}",
                                                    list_text(p_.x.non_const_buffer_sizes()),
                                                    list_text(p_.y.non_const_buffer_sizes())));
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
    const auto dx = devices(p_.x);
    const auto dy = devices(p_.y);
    if (dx != dy)
      report_.add(DifferenceKind::plan, fmt::format("non_const_buffer_device {} -> {}", dx, dy));
  }

  const PlanPair& p_;
  Reporter& report_;
  PlanAlignment align_;
};

}  // namespace

void Reporter::add(DifferenceKind what, std::string text) {
  ++found_;
  if (diff_.differences.size() >= ArtifactDiff::kMaxDifferences) {
    ++diff_.differences_omitted;
    return;
  }
  diff_.differences.push_back({program_, method_, what, std::move(text)});
}

void Reporter::note(const std::string& text) {
  diff_.notes.push_back(fmt::format("{}{}{}: {}", program_, method_.empty() ? "" : " ",
                                    method_, text));
}

void compare_plans(const ProgramView& a, uint32_t pa, const ProgramView& b, uint32_t pb,
                   Reporter& report) {
  PlanComparer(PlanPair(a, pa, b, pb), report).run();
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
