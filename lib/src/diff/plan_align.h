// Two execution plans lined up by content before they are compared (docs/dump-and-verify.md,
// "How diff lines up two methods"): instructions by a sequence alignment, values through the
// instructions that use them, constants by digest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diff/plan_compare.h"

namespace executorch_flatbuffer {
struct ExecutionPlan;
}  // namespace executorch_flatbuffer

namespace ptepack::detail {

// One step of an alignment of two sequences: a pair, or an item of one side only.
struct AlignStep {
  std::optional<uint32_t> a;
  std::optional<uint32_t> b;
};

// The longest common subsequence of two key sequences as steps in order (items
// of A only before items of B only between two pairs). A common prefix and
// suffix are paired directly; a middle of more than `max_cells` key pairs is
// paired position by position as far as its keys agree, the rest one-sided.
[[nodiscard]] std::vector<AlignStep> align_sequences(const std::vector<std::string>& a,
                                                     const std::vector<std::string>& b,
                                                     uint64_t max_cells = uint64_t{1} << 22);

// One plan of each side: what diff lines up and compares.
struct PlanPair {
  PlanPair(const ProgramView& a, uint32_t pa, const ProgramView& b, uint32_t pb);
  const ProgramView& a;
  const ProgramView& b;
  uint32_t pa;
  uint32_t pb;
  const executorch_flatbuffer::ExecutionPlan& x;  // plan pa of a
  const executorch_flatbuffer::ExecutionPlan& y;  // plan pb of b
};

// Two lists of values lined up by their kinds (an inserted argument is one step).
[[nodiscard]] std::vector<AlignStep> align_by_kind(const PlanPair& p, const std::vector<int32_t>& xs,
                                                   const std::vector<int32_t>& ys);

// How two plans correspond.
struct PlanAlignment {
  std::vector<std::optional<uint32_t>> value_in_b;  // per value of A: its value in B
  std::vector<std::optional<uint32_t>> value_in_a;  // per value of B: its value in A
  std::vector<std::vector<AlignStep>> chains;       // per chain both plans have
  // Per chain and instruction of A: its instruction in B (jump destinations).
  std::vector<std::vector<std::optional<uint32_t>>> instruction_in_b;
};

// Lines up plan `pa` of `a` with plan `pb` of `b`: in each chain both have,
// instructions by operator (kernel name and overload, delegate id, or the kind
// of a move, jump or free); within each pair of instructions their arguments by
// kind; values through those arguments, the plans' and chains' inputs and
// outputs and the items of lists they pair, then stored tensors by digest, then
// what is left of each kind in order.
[[nodiscard]] PlanAlignment align_plans(const PlanPair& p);

// The values an instruction reads or writes, in order (a jump's condition, a
// move's source and destination, a free's value, a call's arguments).
[[nodiscard]] std::vector<int32_t> instruction_values(const executorch_flatbuffer::ExecutionPlan& plan,
                                                      uint32_t chain, uint32_t instruction);

// What an instruction runs: "aten::add.out", "delegate XnnpackBackend", "move",
// "jump_false", "free"; the key instructions are lined up by.
[[nodiscard]] std::string instruction_key(const executorch_flatbuffer::ExecutionPlan& plan,
                                          uint32_t chain, uint32_t instruction);

// A value's kind ("Int", "Tensor", ...), the key arguments are lined up by.
[[nodiscard]] std::string value_kind(const executorch_flatbuffer::ExecutionPlan& plan, int32_t value);

}  // namespace ptepack::detail
