// The fields of an execution plan as diff prints and compares them.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "base/format_util.h"
#include "ptepack/base/error.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::detail {

template <typename T>
uint32_t count(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// A vector field as text: "(absent)", or its items (at most 16 shown).
template <typename T, typename Show>
std::string list_text(const flatbuffers::Vector<T>* v, Show show) {
  if (v == nullptr) return "(absent)";
  std::vector<std::string> items;
  for (uint32_t i = 0; i < v->size() && i < 16; ++i) items.push_back(show(v->Get(i)));
  if (v->size() > 16) items.push_back(fmt::format("… {} items", v->size()));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

template <typename T>
std::string list_text(const flatbuffers::Vector<T>* v) {
  return list_text(v, [](T x) { return fmt::format("{}", x); });
}

// Equal vectors of scalars, presence included (an absent vector is not an empty one).
template <typename T>
bool same_list(const flatbuffers::Vector<T>* x, const flatbuffers::Vector<T>* y) {
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

inline bool same_string(const flatbuffers::String* x, const flatbuffers::String* y) {
  if ((x == nullptr) != (y == nullptr)) return false;
  return x == nullptr || x->string_view() == y->string_view();
}

inline std::string string_text(const flatbuffers::String* s) {
  return s == nullptr ? std::string("(absent)") : quote(s->string_view());
}

// "Int", "Tensor", ... or "tag N" for a tag the schema does not name.
[[nodiscard]] std::string kind_name(executorch_flatbuffer::KernelTypes type);
// "FLOAT", or "scalar type N".
[[nodiscard]] std::string scalar_type_text(executorch_flatbuffer::ScalarType type);
// "aten::add.out": an operator as the runtime looks up its kernel.
[[nodiscard]] std::string op_text(const executorch_flatbuffer::ExecutionPlan& plan, int32_t index);
// A value as a person reads it: "Bool false", "Int 3", "Tensor FLOAT [1, 12]"; "none" for -1.
[[nodiscard]] std::string value_summary(const executorch_flatbuffer::ExecutionPlan& plan,
                                        int32_t value);

}  // namespace ptepack::detail
