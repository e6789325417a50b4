// Two plans lined up by content: instructions by LCS over their operators, values through them.
#include "diff/plan_align.h"

#include <algorithm>
#include <map>

#include "diff/plan_text.h"

namespace ptepack::detail {
namespace {

namespace et = executorch_flatbuffer;

const et::Instruction& instruction_at(const et::ExecutionPlan& plan, uint32_t chain,
                                      uint32_t instruction) {
  return *plan.chains()->Get(chain)->instructions()->Get(instruction);
}

template <typename T>
std::vector<int32_t> as_values(const flatbuffers::Vector<T>* v) {
  std::vector<int32_t> out;
  for (uint32_t i = 0; i < count(v); ++i) out.push_back(static_cast<int32_t>(v->Get(i)));
  return out;
}

// The longest common subsequence of a[lo_a, hi_a) and b[lo_b, hi_b), as steps.
void lcs_steps(const std::vector<std::string>& a, const std::vector<std::string>& b,
               uint32_t lo_a, uint32_t hi_a, uint32_t lo_b, uint32_t hi_b,
               std::vector<AlignStep>& steps) {
  const size_t n = hi_a - lo_a;
  const size_t m = hi_b - lo_b;
  // suffix[i][j]: the LCS length of a[lo_a + i, hi_a) and b[lo_b + j, hi_b).
  std::vector<uint32_t> suffix((n + 1) * (m + 1), 0);
  auto at = [m](size_t i, size_t j) { return i * (m + 1) + j; };
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      suffix[at(i, j)] = a[lo_a + i] == b[lo_b + j]
                             ? suffix[at(i + 1, j + 1)] + 1
                             : std::max(suffix[at(i + 1, j)], suffix[at(i, j + 1)]);
    }
  }
  size_t i = 0;
  size_t j = 0;
  std::vector<AlignStep> only_b;
  auto flush = [&] {
    steps.insert(steps.end(), only_b.begin(), only_b.end());
    only_b.clear();
  };
  while (i < n || j < m) {
    if (i < n && j < m && a[lo_a + i] == b[lo_b + j]) {
      flush();
      steps.push_back({static_cast<uint32_t>(lo_a + i++), static_cast<uint32_t>(lo_b + j++)});
    } else if (j == m || (i < n && suffix[at(i + 1, j)] >= suffix[at(i, j + 1)])) {
      steps.push_back({static_cast<uint32_t>(lo_a + i++), std::nullopt});
    } else {
      only_b.push_back({std::nullopt, static_cast<uint32_t>(lo_b + j++)});
    }
  }
  flush();
}

// Lines the values of two plans up, first come first paired.
class ValueMatcher {
 public:
  ValueMatcher(const PlanPair& p, PlanAlignment& out) : p_(p), out_(out) {
    out_.value_in_b.assign(count(p_.x.values()), std::nullopt);
    out_.value_in_a.assign(count(p_.y.values()), std::nullopt);
  }

  // Pairs the two lists where their kinds line up, then the items of every
  // pair of tensor lists that made, and of theirs, without recursion (a list
  // may name a list, as deep as a hostile program has values).
  void lists(const std::vector<int32_t>& xs, const std::vector<int32_t>& ys) {
    pair_aligned(xs, ys);
    while (!lists_.empty()) {
      const auto [ua, ub] = lists_.back();
      lists_.pop_back();
      const auto& x = *p_.x.values()->Get(ua);
      const auto& y = *p_.y.values()->Get(ub);
      if (const auto* l = x.val_as_TensorList()) {
        pair_aligned(as_values(l->items()), as_values(y.val_as_TensorList()->items()));
      } else if (const auto* o = x.val_as_OptionalTensorList()) {
        pair_aligned(as_values(o->items()), as_values(y.val_as_OptionalTensorList()->items()));
      }
    }
  }

  // Stored tensors of equal bytes, then what is left of each kind, in order.
  void rest() {
    std::multimap<std::string, uint32_t> by_digest;
    for (uint32_t v = 0; v < out_.value_in_a.size(); ++v) {
      if (auto d = digest(p_.b, p_.pb, v); !out_.value_in_a[v] && d) by_digest.emplace(*d, v);
    }
    for (uint32_t v = 0; v < out_.value_in_b.size(); ++v) {
      const auto d = digest(p_.a, p_.pa, v);
      if (out_.value_in_b[v] || !d) continue;
      for (auto [it, end] = by_digest.equal_range(*d); it != end; ++it) {
        if (!out_.value_in_a[it->second]) {
          pair(static_cast<int32_t>(v), static_cast<int32_t>(it->second));
          break;
        }
      }
    }
    std::vector<int32_t> xs;
    std::vector<int32_t> ys;
    for (uint32_t v = 0; v < out_.value_in_b.size(); ++v) {
      if (!out_.value_in_b[v]) xs.push_back(static_cast<int32_t>(v));
    }
    for (uint32_t v = 0; v < out_.value_in_a.size(); ++v) {
      if (!out_.value_in_a[v]) ys.push_back(static_cast<int32_t>(v));
    }
    lists(xs, ys);
  }

 private:
  void pair_aligned(const std::vector<int32_t>& xs, const std::vector<int32_t>& ys) {
    for (const auto& step : align_by_kind(p_, xs, ys)) {
      if (step.a && step.b) pair(xs[*step.a], ys[*step.b]);
    }
  }

  // The digest of a value's stored bytes, when it has any.
  static std::optional<std::string> digest(const ProgramView& view, uint32_t plan, uint32_t v) {
    auto it = view.tensor_at.find({plan, v});
    if (it == view.tensor_at.end()) return std::nullopt;
    if (view.program->tensors[it->second].storage == pte::Storage::none) return std::nullopt;
    const Digest& d = view.tensor_digest[it->second];
    return std::string(reinterpret_cast<const char*>(d.data()), d.size());
  }

  void pair(int32_t va, int32_t vb) {
    if (va < 0 || vb < 0 || static_cast<size_t>(va) >= out_.value_in_b.size() ||
        static_cast<size_t>(vb) >= out_.value_in_a.size()) {
      return;
    }
    const auto ua = static_cast<uint32_t>(va);
    const auto ub = static_cast<uint32_t>(vb);
    if (out_.value_in_b[ua] || out_.value_in_a[ub]) return;
    if (value_kind(p_.x, va) != value_kind(p_.y, vb)) return;
    out_.value_in_b[ua] = ub;
    out_.value_in_a[ub] = ua;
    lists_.emplace_back(ua, ub);  // the tensors a list names pair item by item, in lists()
  }

  const PlanPair& p_;
  PlanAlignment& out_;
  std::vector<std::pair<uint32_t, uint32_t>> lists_;  // paired values whose items are next
};

// Instructions of A only followed by instructions of B only in the same place
// are instructions replaced: paired in order (another operator, the arguments
// compared as a pair's), the rest one-sided.
std::vector<AlignStep> replaced(const std::vector<AlignStep>& steps) {
  std::vector<AlignStep> out;
  for (size_t k = 0; k < steps.size();) {
    size_t only_a = k;
    while (only_a < steps.size() && steps[only_a].a && !steps[only_a].b) ++only_a;
    size_t only_b = only_a;
    while (only_b < steps.size() && !steps[only_b].a && steps[only_b].b) ++only_b;
    if (only_a == k || only_b == only_a) {
      out.push_back(steps[k++]);
      continue;
    }
    const size_t n = std::min(only_a - k, only_b - only_a);
    for (size_t i = 0; i < n; ++i) out.push_back({steps[k + i].a, steps[only_a + i].b});
    for (size_t i = n; i < only_a - k; ++i) out.push_back(steps[k + i]);
    for (size_t i = n; i < only_b - only_a; ++i) out.push_back(steps[only_a + i]);
    k = only_b;
  }
  return out;
}

}  // namespace

std::vector<AlignStep> align_sequences(const std::vector<std::string>& a,
                                       const std::vector<std::string>& b, uint64_t max_cells) {
  std::vector<AlignStep> steps;
  const auto na = static_cast<uint32_t>(a.size());
  const auto nb = static_cast<uint32_t>(b.size());
  uint32_t head = 0;
  while (head < na && head < nb && a[head] == b[head]) ++head;
  uint32_t tail = 0;
  while (tail < na - head && tail < nb - head && a[na - 1 - tail] == b[nb - 1 - tail]) ++tail;
  for (uint32_t k = 0; k < head; ++k) steps.push_back({k, k});
  const uint32_t hi_a = na - tail;
  const uint32_t hi_b = nb - tail;
  if (uint64_t{hi_a - head} * (hi_b - head) <= max_cells) {
    lcs_steps(a, b, head, hi_a, head, hi_b, steps);
  } else {
    uint32_t i = head;
    uint32_t j = head;
    for (; i < hi_a && j < hi_b; ++i, ++j) {
      if (a[i] == b[j]) {
        steps.push_back({i, j});
      } else {
        steps.push_back({i, std::nullopt});
        steps.push_back({std::nullopt, j});
      }
    }
    for (; i < hi_a; ++i) steps.push_back({i, std::nullopt});
    for (; j < hi_b; ++j) steps.push_back({std::nullopt, j});
  }
  for (uint32_t k = 0; k < tail; ++k) steps.push_back({hi_a + k, hi_b + k});
  return steps;
}

PlanPair::PlanPair(const ProgramView& a_side, uint32_t pa_index, const ProgramView& b_side,
                   uint32_t pb_index)
    : a(a_side),
      b(b_side),
      pa(pa_index),
      pb(pb_index),
      x(*a_side.program->root()->execution_plan()->Get(pa_index)),
      y(*b_side.program->root()->execution_plan()->Get(pb_index)) {}

std::vector<AlignStep> align_by_kind(const PlanPair& p, const std::vector<int32_t>& xs,
                                     const std::vector<int32_t>& ys) {
  std::vector<std::string> kx;
  std::vector<std::string> ky;
  for (int32_t v : xs) kx.push_back(value_kind(p.x, v));
  for (int32_t v : ys) ky.push_back(value_kind(p.y, v));
  return align_sequences(kx, ky);
}

PlanAlignment align_plans(const PlanPair& p) {
  PlanAlignment out;
  const auto& x = p.x;
  const auto& y = p.y;
  ValueMatcher values(p, out);
  values.lists(as_values(x.inputs()), as_values(y.inputs()));
  values.lists(as_values(x.outputs()), as_values(y.outputs()));
  const uint32_t chains = std::min(count(x.chains()), count(y.chains()));
  for (uint32_t c = 0; c < chains; ++c) {
    const auto& cx = *x.chains()->Get(c);
    const auto& cy = *y.chains()->Get(c);
    std::vector<std::string> kx;
    std::vector<std::string> ky;
    for (uint32_t i = 0; i < count(cx.instructions()); ++i) kx.push_back(instruction_key(x, c, i));
    for (uint32_t j = 0; j < count(cy.instructions()); ++j) ky.push_back(instruction_key(y, c, j));
    out.chains.push_back(replaced(align_sequences(kx, ky)));
    auto& in_b = out.instruction_in_b.emplace_back(kx.size());
    for (const auto& step : out.chains.back()) {
      if (!step.a || !step.b) continue;
      in_b[*step.a] = *step.b;
      values.lists(instruction_values(x, c, *step.a), instruction_values(y, c, *step.b));
    }
    values.lists(as_values(cx.inputs()), as_values(cy.inputs()));
    values.lists(as_values(cx.outputs()), as_values(cy.outputs()));
  }
  values.rest();
  return out;
}

std::vector<int32_t> instruction_values(const et::ExecutionPlan& plan, uint32_t chain,
                                        uint32_t instruction) {
  const auto& ins = instruction_at(plan, chain, instruction);
  switch (ins.instr_args_type()) {
    case et::InstructionArguments::KernelCall:
      return as_values(ins.instr_args_as_KernelCall()->args());
    case et::InstructionArguments::DelegateCall:
      return as_values(ins.instr_args_as_DelegateCall()->args());
    case et::InstructionArguments::MoveCall: {
      const auto* m = ins.instr_args_as_MoveCall();
      return {m->move_from(), m->move_to()};
    }
    case et::InstructionArguments::JumpFalseCall:
      return {ins.instr_args_as_JumpFalseCall()->cond_value_index()};
    case et::InstructionArguments::FreeCall:
      return {ins.instr_args_as_FreeCall()->value_index()};
    default:
      return {};
  }
}

std::string instruction_key(const et::ExecutionPlan& plan, uint32_t chain, uint32_t instruction) {
  const auto& ins = instruction_at(plan, chain, instruction);
  switch (ins.instr_args_type()) {
    case et::InstructionArguments::KernelCall:
      return op_text(plan, ins.instr_args_as_KernelCall()->op_index());
    case et::InstructionArguments::DelegateCall: {
      const int32_t d = ins.instr_args_as_DelegateCall()->delegate_index();
      if (d < 0 || static_cast<uint32_t>(d) >= count(plan.delegates())) return "delegate ?";
      const auto* id = plan.delegates()->Get(static_cast<uint32_t>(d))->id();
      return "delegate " + (id == nullptr ? std::string("?") : escaped(id->string_view()));
    }
    case et::InstructionArguments::MoveCall:
      return "move";
    case et::InstructionArguments::JumpFalseCall:
      return "jump_false";
    case et::InstructionArguments::FreeCall:
      return "free";
    default:
      return fmt::format("instruction tag {}", static_cast<int>(ins.instr_args_type()));
  }
}

std::string value_kind(const et::ExecutionPlan& plan, int32_t value) {
  if (value < 0 || static_cast<uint32_t>(value) >= count(plan.values())) return "?";
  return kind_name(plan.values()->Get(static_cast<uint32_t>(value))->val_type());
}

}  // namespace ptepack::detail
