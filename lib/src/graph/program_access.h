// One way to read a program's fields, whether it is an object tree (ProgramT) or a flatbuffer.
#pragma once

// The checks every reader applies (graph structure, key roles, data against
// metas) are written once, as templates over these accessors: pack runs them
// on the object tree it renames, dump and verify on the verified flatbuffer
// itself, which is several times smaller than its tree. Each accessor takes
// either form; lists come back as ranges of references (tables) or of
// std::string_view (strings), absent flatbuffer fields as empty ones.
//
// On the tree, the accessors of data keys keep the object's constness, so a
// walk over a non-const tree can rename keys in place.

#include <cstddef>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptepack/graph/program.h"

namespace ptepack::access {

// --- Ranges ----------------------------------------------------------------

// A list's elements through a projection: table pointers (unique_ptr or
// flatbuffer offsets) as references, flatbuffer strings as std::string_view.
template <typename It, typename Project>
class ProjectedRange {
 public:
  using reference = decltype(Project{}(*std::declval<It>()));
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::remove_cvref_t<reference>;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    explicit iterator(It it) : it_(it) {}
    reference operator*() const { return Project{}(*it_); }
    iterator& operator++() {
      ++it_;
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++it_;
      return before;
    }
    bool operator==(const iterator& other) const { return it_ == other.it_; }

   private:
    It it_;
  };
  ProjectedRange(It begin, It end, size_t size) : begin_(begin), end_(end), size_(size) {}
  [[nodiscard]] iterator begin() const { return iterator(begin_); }
  [[nodiscard]] iterator end() const { return iterator(end_); }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] reference operator[](size_t i) const {
    return Project{}(*std::next(begin_, static_cast<std::ptrdiff_t>(i)));
  }

 private:
  It begin_;
  It end_;
  size_t size_;
};

template <typename Ref>
struct Deref {
  template <typename Pointer>
  Ref operator()(const Pointer& p) const {
    return static_cast<Ref>(*p);
  }
};
struct AsView {
  std::string_view operator()(const flatbuffers::String* s) const {
    return {s->c_str(), s->size()};
  }
};

// A flatbuffer list, empty when the field is absent.
template <typename Project, typename T>
auto projected(const flatbuffers::Vector<T>* list) {
  using It = typename flatbuffers::Vector<T>::const_iterator;
  using Range = ProjectedRange<It, Project>;
  return list == nullptr ? Range(It(nullptr, 0), It(nullptr, 0), 0)
                         : Range(list->begin(), list->end(), list->size());
}

template <typename T>
auto tables(std::vector<std::unique_ptr<T>>& list) {
  return ProjectedRange<typename std::vector<std::unique_ptr<T>>::iterator, Deref<T&>>(
      list.begin(), list.end(), list.size());
}
template <typename T>
auto tables(const std::vector<std::unique_ptr<T>>& list) {
  return ProjectedRange<typename std::vector<std::unique_ptr<T>>::const_iterator, Deref<const T&>>(
      list.begin(), list.end(), list.size());
}
template <typename T>
auto tables(const flatbuffers::Vector<flatbuffers::Offset<T>>* list) {
  return projected<Deref<const T&>>(list);
}

// A flatbuffer list of strings as std::string_view (a tree's std::vector<std::string>
// is used as it is: its elements convert).
using StringList = flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>;
using StringRange = decltype(projected<AsView>(std::declval<const StringList*>()));

inline const std::vector<std::string>& strings(const std::vector<std::string>& list) {
  return list;
}
inline StringRange strings(const StringList* list) { return projected<AsView>(list); }

// A flatbuffer list of scalars (the tree's std::vector is used as it is).
struct AsValue {
  template <typename T>
  T operator()(T value) const {
    return value;
  }
};
template <typename T>
const std::vector<T>& scalars(const std::vector<T>& list) {
  return list;
}
template <typename T>
auto scalars(const flatbuffers::Vector<T>* list) {
  return projected<AsValue>(list);
}

inline std::string_view text(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : std::string_view(s->c_str(), s->size());
}

// T is the object-tree type U, const or not.
template <typename T, typename U>
concept TreeOf = std::is_same_v<std::remove_const_t<T>, U>;

// `value` (a tree's member reached through a unique_ptr, which drops const)
// with the constness of its owner.
template <typename Owner, typename T>
auto& as_owner(T& value) {
  if constexpr (std::is_const_v<Owner>) {
    return std::as_const(value);
  } else {
    return value;
  }
}

// --- Program ---------------------------------------------------------------

inline auto methods(const nb::ProgramT& p) { return tables(p.methods); }
inline auto methods(const nb::Program& p) { return tables(p.methods()); }
inline std::string_view version(const nb::ProgramT& p) { return p.version; }
inline std::string_view version(const nb::Program& p) { return text(p.version()); }

// --- Method ----------------------------------------------------------------

inline std::string_view name(const nb::MethodT& m) { return m.name; }
inline std::string_view name(const nb::Method& m) { return text(m.name()); }
template <TreeOf<nb::MethodT> M>
auto& graph(M& m) {
  return as_owner<M>(*m.graph);
}
inline const nb::Graph& graph(const nb::Method& m) { return *m.graph(); }
template <TreeOf<nb::MethodT> M>
auto constants(M& m) {
  return tables(m.constants);
}
inline auto constants(const nb::Method& m) { return tables(m.constants()); }
template <TreeOf<nb::MethodT> M>
auto output_specs(M& m) {
  return tables(m.output_specs);
}
inline auto output_specs(const nb::Method& m) { return tables(m.output_specs()); }
template <TreeOf<nb::MethodT> M>
auto mutable_buffers(M& m) {
  return tables(m.mutable_buffers);
}
inline auto mutable_buffers(const nb::Method& m) { return tables(m.mutable_buffers()); }

// --- Graph -----------------------------------------------------------------

template <TreeOf<nb::GraphT> G>
auto nodes(G& g) {
  return tables(g.nodes);
}
inline auto nodes(const nb::Graph& g) { return tables(g.nodes()); }
inline const auto& inputs(const nb::GraphT& g) { return g.inputs; }
inline auto inputs(const nb::Graph& g) { return strings(g.inputs()); }
inline const auto& outputs(const nb::GraphT& g) { return g.outputs; }
inline auto outputs(const nb::Graph& g) { return strings(g.outputs()); }
template <TreeOf<nb::GraphT> G>
auto tensor_values(G& g) {
  return tables(g.tensor_values);
}
inline auto tensor_values(const nb::Graph& g) { return tables(g.tensor_values()); }

// --- Node and its parts ----------------------------------------------------

inline std::string_view name(const nb::NodeT& n) { return n.name; }
inline std::string_view name(const nb::Node& n) { return text(n.name()); }
inline nb::OpKind op_kind(const nb::NodeT& n) { return n.op_kind; }
inline nb::OpKind op_kind(const nb::Node& n) { return n.op_kind(); }
inline std::string_view target(const nb::NodeT& n) { return n.target; }
inline std::string_view target(const nb::Node& n) { return text(n.target()); }
template <TreeOf<nb::NodeT> N>
auto inputs(N& n) {
  return tables(n.inputs);
}
inline auto inputs(const nb::Node& n) { return tables(n.inputs()); }
inline auto outputs(const nb::NodeT& n) { return tables(n.outputs); }
inline auto outputs(const nb::Node& n) { return tables(n.outputs()); }

inline std::string_view name(const nb::NamedArgumentT& a) { return a.name; }
inline std::string_view name(const nb::NamedArgument& a) { return text(a.name()); }
template <TreeOf<nb::NamedArgumentT> A>
auto& arg(A& a) {
  return as_owner<A>(*a.arg);
}
inline const nb::Argument& arg(const nb::NamedArgument& a) { return *a.arg(); }

inline std::string_view name(const nb::OutputT& o) { return o.name; }
inline std::string_view name(const nb::Output& o) { return text(o.name()); }
inline std::string_view alias_of(const nb::OutputT& o) { return o.alias_of; }
inline std::string_view alias_of(const nb::Output& o) { return text(o.alias_of()); }
inline const auto& names(const nb::OutputT& o) { return o.names; }
inline auto names(const nb::Output& o) { return strings(o.names()); }

// --- Arguments: the union's tag and its members (null when the tag differs) --

inline nb::ArgumentValue type(const nb::ArgumentT& a) { return a.value.type; }
inline nb::ArgumentValue type(const nb::Argument& a) { return a.value_type(); }
inline const nb::TensorArgT* tensor_arg(const nb::ArgumentT& a) { return a.value.AsTensorArg(); }
inline const nb::TensorArg* tensor_arg(const nb::Argument& a) { return a.value_as_TensorArg(); }
inline const nb::IntArgT* int_arg(const nb::ArgumentT& a) { return a.value.AsIntArg(); }
inline const nb::IntArg* int_arg(const nb::Argument& a) { return a.value_as_IntArg(); }
inline const nb::FloatArgT* float_arg(const nb::ArgumentT& a) { return a.value.AsFloatArg(); }
inline const nb::FloatArg* float_arg(const nb::Argument& a) { return a.value_as_FloatArg(); }
inline const nb::BoolArgT* bool_arg(const nb::ArgumentT& a) { return a.value.AsBoolArg(); }
inline const nb::BoolArg* bool_arg(const nb::Argument& a) { return a.value_as_BoolArg(); }
inline const nb::IntListArgT* int_list_arg(const nb::ArgumentT& a) {
  return a.value.AsIntListArg();
}
inline const nb::IntListArg* int_list_arg(const nb::Argument& a) { return a.value_as_IntListArg(); }
inline const nb::TensorListArgT* tensor_list_arg(const nb::ArgumentT& a) {
  return a.value.AsTensorListArg();
}
inline const nb::TensorListArg* tensor_list_arg(const nb::Argument& a) {
  return a.value_as_TensorListArg();
}
inline const nb::OptionalTensorListArgT* optional_tensor_list_arg(const nb::ArgumentT& a) {
  return a.value.AsOptionalTensorListArg();
}
inline const nb::OptionalTensorListArg* optional_tensor_list_arg(const nb::Argument& a) {
  return a.value_as_OptionalTensorListArg();
}
inline nb::GraphArgT* graph_arg(nb::ArgumentT& a) { return a.value.AsGraphArg(); }
inline const nb::GraphArgT* graph_arg(const nb::ArgumentT& a) { return a.value.AsGraphArg(); }
inline const nb::GraphArg* graph_arg(const nb::Argument& a) { return a.value_as_GraphArg(); }

inline std::string_view name(const nb::TensorArgT& a) { return a.name; }
inline std::string_view name(const nb::TensorArg& a) { return text(a.name()); }
inline std::string_view ref(const nb::IntArgT& a) { return a.ref; }
inline std::string_view ref(const nb::IntArg& a) { return text(a.ref()); }
inline std::string_view ref(const nb::FloatArgT& a) { return a.ref; }
inline std::string_view ref(const nb::FloatArg& a) { return text(a.ref()); }
inline std::string_view ref(const nb::BoolArgT& a) { return a.ref; }
inline std::string_view ref(const nb::BoolArg& a) { return text(a.ref()); }
inline const auto& values(const nb::IntListArgT& l) { return l.values; }
inline auto values(const nb::IntListArg& l) { return scalars(l.values()); }
inline const auto& refs(const nb::IntListArgT& l) { return l.refs; }
inline auto refs(const nb::IntListArg& l) { return strings(l.refs()); }
inline const auto& names(const nb::TensorListArgT& l) { return l.names; }
inline auto names(const nb::TensorListArg& l) { return strings(l.names()); }
inline const auto& names(const nb::OptionalTensorListArgT& l) { return l.names; }
inline auto names(const nb::OptionalTensorListArg& l) { return strings(l.names()); }
inline const auto& has_value(const nb::OptionalTensorListArgT& l) { return l.has_value; }
inline auto has_value(const nb::OptionalTensorListArg& l) { return scalars(l.has_value()); }
inline std::string_view name(const nb::GraphArgT& a) { return a.name; }
inline std::string_view name(const nb::GraphArg& a) { return text(a.name()); }
template <TreeOf<nb::GraphArgT> A>
auto& graph(A& a) {
  return as_owner<A>(*a.graph);
}
inline const nb::Graph& graph(const nb::GraphArg& a) { return *a.graph(); }

// --- Tensor metadata -------------------------------------------------------

inline std::string_view name(const nb::TensorValueT& v) { return v.name; }
inline std::string_view name(const nb::TensorValue& v) { return text(v.name()); }
template <typename V>
requires TreeOf<V, nb::TensorValueT> || TreeOf<V, nb::NamedTensorRefT>
auto& meta(V& v) { return as_owner<V>(*v.meta); }
inline const nb::TensorMeta& meta(const nb::TensorValue& v) { return *v.meta(); }
inline const nb::TensorMeta& meta(const nb::NamedTensorRef& c) { return *c.meta(); }

inline nb::ScalarType dtype(const nb::TensorMetaT& m) { return m.dtype; }
inline nb::ScalarType dtype(const nb::TensorMeta& m) { return m.dtype(); }
inline auto sizes(const nb::TensorMetaT& m) { return tables(m.sizes); }
inline auto sizes(const nb::TensorMeta& m) { return tables(m.sizes()); }
inline int64_t min(const nb::DimT& d) { return d.min; }
inline int64_t min(const nb::Dim& d) { return d.min(); }
inline int64_t max(const nb::DimT& d) { return d.max; }
inline int64_t max(const nb::Dim& d) { return d.max(); }
inline bool quantized(const nb::TensorMetaT& m) { return m.quant != nullptr; }
inline bool quantized(const nb::TensorMeta& m) { return m.quant() != nullptr; }
// The meta's affine group, or null (unquantised, or another scheme).
template <TreeOf<nb::TensorMetaT> M>
auto* affine_group(M& m) {
  using Group = std::conditional_t<std::is_const_v<M>, const nb::AffineGroupT, nb::AffineGroupT>;
  Group* group = m.quant ? m.quant->scheme.AsAffineGroup() : nullptr;
  return group;
}
inline const nb::AffineGroup* affine_group(const nb::TensorMeta& m) {
  return m.quant() ? m.quant()->scheme_as_AffineGroup() : nullptr;
}
inline nb::ScalarType scale_dtype(const nb::AffineGroupT& g) { return g.scale_dtype; }
inline nb::ScalarType scale_dtype(const nb::AffineGroup& g) { return g.scale_dtype(); }
inline nb::ScalarType zero_point_dtype(const nb::AffineGroupT& g) { return g.zero_point_dtype; }
inline nb::ScalarType zero_point_dtype(const nb::AffineGroup& g) { return g.zero_point_dtype(); }

// --- Data keys (the tree's keep their constness, for renaming) -------------

template <TreeOf<nb::AffineGroupT> G>
auto& scale_data_key(G& g) {
  return g.scale_data_key;
}
inline std::string_view scale_data_key(const nb::AffineGroup& g) {
  return text(g.scale_data_key());
}
template <TreeOf<nb::AffineGroupT> G>
auto& zero_point_data_key(G& g) {
  return g.zero_point_data_key;
}
inline std::string_view zero_point_data_key(const nb::AffineGroup& g) {
  return text(g.zero_point_data_key());
}

inline std::string_view name(const nb::NamedTensorRefT& c) { return c.name; }
inline std::string_view name(const nb::NamedTensorRef& c) { return text(c.name()); }
template <TreeOf<nb::NamedTensorRefT> C>
auto& data_key(C& c) {
  return c.data_key;
}
inline std::string_view data_key(const nb::NamedTensorRef& c) { return text(c.data_key()); }
inline bool mutated(const nb::NamedTensorRefT& c) { return c.mutated; }
inline bool mutated(const nb::NamedTensorRef& c) { return c.mutated(); }

inline std::string_view name(const nb::OutputSpecT& s) { return s.name; }
inline std::string_view name(const nb::OutputSpec& s) { return text(s.name()); }
inline nb::OutputKind kind(const nb::OutputSpecT& s) { return s.kind; }
inline nb::OutputKind kind(const nb::OutputSpec& s) { return s.kind(); }
template <TreeOf<nb::OutputSpecT> S>
auto& target(S& s) {
  return s.target;
}
inline std::string_view target(const nb::OutputSpec& s) { return text(s.target()); }

inline std::string_view name(const nb::MutableBufferSpecT& b) { return b.name; }
inline std::string_view name(const nb::MutableBufferSpec& b) { return text(b.name()); }
template <TreeOf<nb::MutableBufferSpecT> B>
auto& fqn(B& b) {
  return b.fqn;
}
inline std::string_view fqn(const nb::MutableBufferSpec& b) { return text(b.fqn()); }

}  // namespace ptepack::access
