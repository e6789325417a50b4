// The transformation: program-wide mutability, state/ and <method>/ names, checks, data binding.
#include "ptepack/graph/merge.h"
#include "base/parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "ptepack/base/error.h"
#include "ptepack/base/memory_return.h"
#include "graph/program_walk.h"
#include "graph/validate.h"
#include "hash/parallel_hash.h"
#include "ptepack/io/progress.h"

namespace ptepack {
namespace {

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) {
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}

bool same_bytes(const ByteRange& a, const ByteRange& b) {
  if (a.size != b.size) return false;
  if (a.file == b.file && a.offset == b.offset) return true;
  auto x = chunk_buffer(a.size);
  auto y = chunk_buffer(a.size);
  for (uint64_t done = 0; done < a.size;) {
    auto n = static_cast<size_t>(std::min<uint64_t>(x.size(), a.size - done));
    a.file->read_at(a.offset + done, std::span<uint8_t>(x.data(), n));
    b.file->read_at(b.offset + done, std::span<uint8_t>(y.data(), n));
    if (!std::equal(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n), y.begin())) return false;
    done += n;
  }
  return true;
}

// How a final key was written in an input: as it is, or without the prefix
// (method or state) its rename added, which ends at its first '/' (method
// names hold none).
struct Origin {
  bool renamed = false;
  size_t listed_for = SIZE_MAX;  // the last method whose renames list it

  [[nodiscard]] std::string_view source(std::string_view final_key) const {
    return renamed ? final_key.substr(final_key.find('/') + 1) : final_key;
  }
};

// Where a final key's data came from, to detect disagreeing state data.
struct Binding {
  const TensorData* data;     // in its input's table
  size_t input;               // position on the command line (two inputs may share a path)
  size_t entry;               // the data's number in its input's table (key order)
  const std::string* method;  // in the merged program
};

// Method names unique and valid, METHOD= renames applied, each method's
// structure checked alone (read-only); structural problems are reported in
// method order whatever the threads.
void check_methods(std::vector<MergeInput>& inputs, unsigned jobs) {
  std::map<std::string, std::string> method_owner;  // method -> input name
  std::vector<std::pair<const nb::MethodT*, const std::string*>> to_validate;  // in order
  for (auto& input : inputs) {
    const auto& version = input.program->version;
    if (!version.empty() && version != "1") {
      fail_input("{}: unsupported program version {} (expected \"1\")", input.name, quote(version));
    }
    if (input.rename_method) {
      if (input.program->methods.size() != 1) {
        fail(ErrorCode::usage,
             "{}: METHOD= renames a single method, but the input holds {} methods", input.name,
             input.program->methods.size());
      }
      input.program->methods[0]->name = *input.rename_method;
    }
    if (input.program->methods.empty()) fail_input("{}: program has no methods", input.name);
    for (const auto& method : input.program->methods) {
      auto problem = method_name_problem(method->name);
      if (!problem.empty()) {
        fail(input.rename_method ? ErrorCode::usage : ErrorCode::invalid_input, "{}: {}",
             input.name, problem);
      }
      auto [it, inserted] = method_owner.emplace(method->name, input.name);
      if (!inserted) {
        fail(ErrorCode::conflict, "{}: method {} is already provided by {}", input.name,
             quote(method->name), it->second);
      }
      to_validate.emplace_back(method.get(), &input.name);
    }
  }
  std::vector<std::vector<std::string>> structure(to_validate.size());
  {
    // The checkers' name sets, freed on their threads, are not reused by the
    // steps below: their pages go back at once.
    PromptMemoryReturn prompt;
    parallel_for(to_validate.size(), std::max(1u, jobs), [&](size_t i) {
      structure[i] = validate_method_structure(*to_validate[i].first, *to_validate[i].second);
    });
  }
  std::vector<std::string> problems;
  for (const auto& list : structure) problems.insert(problems.end(), list.begin(), list.end());
  if (!problems.empty()) throw Error(ErrorCode::invalid_input, join_lines(problems));
}

// A method's data against its declarations, on the source keys (before renaming).
void check_method_data(const nb::MethodT& method, const TensorLookup& data_of,
                       const std::string& input_name) {
  const std::string& method_name = method.name;
  for (const auto& c : method.constants) {
    const TensorData* data = data_of.data(c->data_key);
    if (data == nullptr) continue;
    auto problem = constant_data_problem(*c, *data, method_name, input_name);
    if (!problem.empty()) throw Error(ErrorCode::invalid_input, problem);
  }
  std::unordered_map<std::string_view, const nb::TensorValueT*> value_named;
  if (!method.mutable_buffers.empty()) {
    for (const auto& tv : method.graph->tensor_values) value_named.emplace(tv->name, tv.get());
  }
  for (const auto& buffer : method.mutable_buffers) {
    const TensorData* data = data_of.data(buffer->fqn);
    auto tv = value_named.find(buffer->name);
    if (data == nullptr || tv == value_named.end()) continue;
    auto problem = tensor_data_problem(
        *tv->second->meta, *data,
        fmt::format("{}: method {}: mutable buffer {} (key {})", input_name, quote(method_name),
                    quote(buffer->name), quote(buffer->fqn)));
    if (!problem.empty()) throw Error(ErrorCode::invalid_input, problem);
  }
  for_each_tensor_meta(method, [&](const nb::TensorMetaT& meta, std::string_view name) {
    auto found = quant_data_problems(meta, name, data_of, method_name, input_name);
    if (!found.empty()) throw Error(ErrorCode::invalid_input, found.front());
  });
}

// One input while its keys are renamed and bound.
struct InputPass {
  size_t index;  // position on the command line
  const MergeInput& input;
  TensorLookup data_of;
  // Final key -> how it was written. Keyed by views of the program's own
  // strings, which hold the final keys once renamed.
  std::unordered_map<std::string_view, Origin> origin;
  std::vector<bool> used;           // per entry of input.data
  std::vector<uint32_t>& bindings;  // final keys bound to each entry
  size_t method_index = 0;
  const std::string* method_name = nullptr;
};

// The merge's state between its phases: rules 1-4 of the transformation.
class Merger {
 public:
  Merger(std::vector<MergeInput>& inputs, bool list_renames, MergedProgram& out)
      : inputs_(inputs), list_renames_(list_renames), out_(out), bindings_per_entry_(inputs.size()) {}

  void collect_state();
  void bind_input(size_t input_index);
  void check_state_bound() const;
  void move_tensors();
  void move_renames_and_methods();

 private:
  bool is_mutable(const std::string& key);
  void bind_key(InputPass& pass, std::string& key, KeyRole role);
  void bind_data(InputPass& pass, const std::string& key, size_t entry);

  std::vector<MergeInput>& inputs_;
  const bool list_renames_;
  MergedProgram& out_;
  std::unordered_set<std::string> state_keys_;
  std::string state_name_;  // reused: one lookup per key reference, no allocation
  // Mutable buffers must agree on dtype and shape across methods.
  BufferDeclarations buffer_decls_;
  std::vector<std::string> decl_problems_;
  // Final key -> data source, keyed by views of the program's final keys. Hashed:
  // a program can hold hundreds of thousands of keys with long common prefixes.
  std::unordered_map<std::string_view, Binding> bound_;
  // State keys read as tensors; an immutable key read as one fails at once
  // when its input has no data for it.
  std::vector<std::string> needs_data_;
  std::unordered_set<std::string> declared_state_;  // a constant or MutableBufferSpec declares
  std::vector<std::pair<std::string, std::string>> mutation_targets_;  // (input: method, key)
  std::vector<std::vector<uint32_t>> bindings_per_entry_;
  std::deque<KeyRename> renames_;  // no spare capacity while it grows
};

// Rule 1: mutability is program-wide, decided on the state name.
void Merger::collect_state() {
  for (auto& input : inputs_) {
    for (const auto& method : input.program->methods) {
      for (const auto& c : method->constants) {
        if (c->mutated) out_.state.insert(state_key(c->data_key));
      }
      for_each_data_key(*method, [&](const std::string& key, KeyRole role) {
        if (role == KeyRole::mutable_buffer || role == KeyRole::mutation_target) {
          out_.state.insert(state_key(key));
        }
      });
    }
  }
  state_keys_.insert(out_.state.begin(), out_.state.end());
}

bool Merger::is_mutable(const std::string& key) {
  if (starts_with(key, kStatePrefix)) return state_keys_.count(key) > 0;
  state_name_.assign(kStatePrefix);
  state_name_ += key;
  return state_keys_.count(state_name_) > 0;
}

// Rules 2-4: rename every reference; detect collisions within an input.
void Merger::bind_input(size_t input_index) {
  auto& input = inputs_[input_index];
  InputPass pass{input_index, input, TensorLookup(input.data), {}, {},
                 bindings_per_entry_[input_index]};
  pass.used.assign(pass.data_of.size(), false);
  pass.bindings.assign(pass.data_of.size(), 0);
  for (size_t method_index = 0; method_index < input.program->methods.size(); ++method_index) {
    auto& method = input.program->methods[method_index];
    pass.method_index = method_index;
    pass.method_name = &method->name;
    buffer_decls_.add_method(
        *method, [&](const std::string& key) { return out_.state.count(key) > 0; }, state_key,
        decl_problems_);
    if (!decl_problems_.empty())
      throw Error(ErrorCode::conflict, input.name + ": " + decl_problems_.front());
    check_method_data(*method, pass.data_of, input.name);
    for_each_data_key(*method,
                      [&](std::string& key, KeyRole role) { bind_key(pass, key, role); });
  }
  for (size_t i = 0; i < pass.used.size(); ++i) {
    if (!pass.used[i]) {
      ++out_.dropped_keys;
      out_.dropped_bytes += pass.data_of.entry(i).second.bytes.size;
    }
  }
}

// One reference: `key` becomes its final key, its data is bound.
void Merger::bind_key(InputPass& pass, std::string& key, KeyRole role) {
  const std::string& method_name = *pass.method_name;
  const std::string& input_name = pass.input.name;
  bool mut = is_mutable(key);
  std::string final_name = final_key(method_name, key, mut);
  const bool renamed = final_name != key;
  auto o = pass.origin.find(final_name);
  if (o != pass.origin.end() && o->second.source(o->first) != key) {
    fail(ErrorCode::conflict, "{}: method {}: keys {} and {} both become {}", input_name,
         quote(method_name), quote(std::string(o->second.source(o->first))), quote(key),
         quote(final_name));
  }
  bool tensor_role =
      role == KeyRole::constant || role == KeyRole::scale || role == KeyRole::zero_point;
  if (tensor_role && mut) needs_data_.push_back(final_name);
  if (mut && (role == KeyRole::constant || role == KeyRole::mutable_buffer))
    declared_state_.insert(final_name);
  if (role == KeyRole::mutation_target) {
    mutation_targets_.emplace_back(fmt::format("{}: method {}", input_name, quote(method_name)),
                                   final_name);
  }
  size_t entry = pass.data_of.find(key);
  if (entry == TensorLookup::npos && tensor_role && !mut) {
    fail_input("{}: method {}: {} key {} has no data", input_name, quote(method_name),
               key_role_name(role), quote(key));
  }
  if (renamed) {
    // Within a method a final key has one source (or the merge failed above).
    if (o == pass.origin.end() || o->second.listed_for != pass.method_index) {
      ++out_.renamed_keys;
      if (list_renames_) renames_.push_back({method_name, key, final_name});
    }
    key = std::move(final_name);
  }
  // From here `key` is the final key.
  if (o == pass.origin.end()) o = pass.origin.emplace(key, Origin{renamed}).first;
  if (renamed) o->second.listed_for = pass.method_index;
  if (entry != TensorLookup::npos) bind_data(pass, key, entry);
}

// The final key `key` takes entry `entry` of the input's data; state keys
// bound by several inputs must hold the same initial data.
void Merger::bind_data(InputPass& pass, const std::string& key, size_t entry) {
  const TensorData& data = pass.data_of.entry(entry).second;
  auto [b, first] = bound_.emplace(key, Binding{&data, pass.index, entry, pass.method_name});
  pass.used[entry] = true;
  if (first) ++pass.bindings[entry];
  if (!first && b->second.input != pass.index) {
    const auto& prev = b->second;
    bool same = prev.data->dtype == data.dtype && prev.data->shape == data.shape &&
                same_bytes(prev.data->bytes, data.bytes);
    if (!same) {
      fail(ErrorCode::conflict,
           "{}: state key {}: initial data differs between {} (method {}) and {} (method {})",
           pass.input.name, quote(key), prev.data->bytes.file->name(), quote(*prev.method),
           data.bytes.file->name(), quote(*pass.method_name));
    }
  }
}

// Every mutation target declared, every state key read as a tensor bound.
void Merger::check_state_bound() const {
  for (const auto& [where, key] : mutation_targets_) {
    if (!declared_state_.count(key)) {
      fail_input(
          "{}: buffer mutation target {} names no buffer (no constant or MutableBufferSpec "
          "declares it)",
          where, quote(key));
    }
  }
  const std::string* unbound = nullptr;  // the smallest, so the message never depends on order
  for (const auto& key : needs_data_) {
    if (!bound_.count(key) && (unbound == nullptr || key < *unbound)) unbound = &key;
  }
  if (unbound != nullptr) {
    fail_input("{}: state key {} is read as a tensor but no input provides its data",
               inputs_.front().name, quote(*unbound));
  }
}

// Sorted first, so the ordered table is filled at its end instead of searched;
// each binding's key moves into the table and its node is freed. An input's
// entry bound once (or bound for the last time) moves into the table whole,
// node and all, so the input's table empties as the merged one fills.
void Merger::move_tensors() {
  std::vector<decltype(bound_)::node_type> by_key;
  by_key.reserve(bound_.size());
  while (!bound_.empty()) by_key.push_back(bound_.extract(bound_.begin()));
  std::sort(by_key.begin(), by_key.end(),
            [](const auto& a, const auto& b) { return a.key() < b.key(); });
  std::vector<std::vector<TensorTable::iterator>> entry_at(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    entry_at[i].reserve(inputs_[i].data.size());
    for (auto it = inputs_[i].data.begin(); it != inputs_[i].data.end(); ++it)
      entry_at[i].push_back(it);
  }
  for (auto& binding : by_key) {
    const Binding& b = binding.mapped();
    if (--bindings_per_entry_[b.input][b.entry] > 0) {
      out_.tensors.emplace_hint(out_.tensors.end(), std::string(binding.key()), *b.data);
    } else {
      auto node = inputs_[b.input].data.extract(entry_at[b.input][b.entry]);
      node.key().assign(binding.key());
      out_.tensors.insert(out_.tensors.end(), std::move(node));
    }
    binding = {};
  }
}

void Merger::move_renames_and_methods() {
  out_.renames.reserve(renames_.size());
  while (!renames_.empty()) {
    out_.renames.push_back(std::move(renames_.front()));
    renames_.pop_front();
  }
  for (auto& input : inputs_) {
    for (auto& method : input.program->methods) out_.program->methods.push_back(std::move(method));
  }
}

}  // namespace

MergedProgram merge_programs(std::vector<MergeInput> inputs, unsigned jobs, bool list_renames) {
  MergedProgram out;
  out.program = std::make_unique<nb::ProgramT>();
  out.program->version = "1";
  check_methods(inputs, jobs);
  Merger merger(inputs, list_renames, out);
  merger.collect_state();
  for (size_t i = 0; i < inputs.size(); ++i) merger.bind_input(i);
  merger.check_state_bound();
  merger.move_tensors();
  merger.move_renames_and_methods();
  return out;
}

}  // namespace ptepack
