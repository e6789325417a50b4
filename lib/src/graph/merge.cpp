// The transformation: program-wide mutability, state/ and <method>/ names, checks, data binding.
#include "ptepack/graph/merge.h"
#include "ptepack/base/parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "ptepack/base/error.h"
#include "ptepack/base/memory_return.h"
#include "ptepack/graph/program_walk.h"
#include "ptepack/graph/validate.h"
#include "ptepack/hash/parallel_hash.h"
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

}  // namespace

MergedProgram merge_programs(std::vector<MergeInput> inputs, unsigned jobs, bool list_renames) {
  MergedProgram out;
  out.program = std::make_unique<nb::ProgramT>();
  out.program->version = "1";

  // Method names and structure.
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
  // Each method's structure is checked alone (read-only); the problems are
  // reported in method order whatever the threads.
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

  // Rule 1: mutability is program-wide, decided on the state name.
  for (auto& input : inputs) {
    for (const auto& method : input.program->methods) {
      for (const auto& c : method->constants) {
        if (c->mutated) out.state.insert(state_key(c->data_key));
      }
      for_each_data_key(*method, [&](const std::string& key, KeyRole role) {
        if (role == KeyRole::mutable_buffer || role == KeyRole::mutation_target) {
          out.state.insert(state_key(key));
        }
      });
    }
  }
  const std::unordered_set<std::string> state_keys(out.state.begin(), out.state.end());
  std::string state_name;  // reused: one lookup per key reference, no allocation
  auto is_mutable = [&](const std::string& key) {
    if (starts_with(key, kStatePrefix)) return state_keys.count(key) > 0;
    state_name.assign(kStatePrefix);
    state_name += key;
    return state_keys.count(state_name) > 0;
  };

  // Mutable buffers must agree on dtype and shape across methods.
  BufferDeclarations buffer_decls;
  std::vector<std::string> decl_problems;

  // Rules 2-4: rename every reference; detect collisions within an input.
  // Hashed: a program can hold hundreds of thousands of keys with long common prefixes.
  // Final key -> data source, keyed by views of the program's final keys.
  std::unordered_map<std::string_view, Binding> bound;
  // State keys read as tensors; an immutable key read as one fails at once
  // when its input has no data for it.
  std::vector<std::string> needs_data;
  // State keys a constant or MutableBufferSpec declares.
  std::unordered_set<std::string> declared_state;
  std::vector<std::pair<std::string, std::string>> mutation_targets;  // (input: method, final key)
  std::vector<std::vector<uint32_t>> bindings_per_entry(inputs.size());
  std::deque<KeyRename> renames;  // no spare capacity while it grows
  for (size_t input_index = 0; input_index < inputs.size(); ++input_index) {
    auto& input = inputs[input_index];
    const TensorLookup data_of(input.data);
    // Final key -> how it was written. Keyed by views of the program's own
    // strings, which hold the final keys once renamed.
    std::unordered_map<std::string_view, Origin> origin;
    std::vector<bool> used(data_of.size());            // per entry of input.data
    auto& bindings = bindings_per_entry[input_index];  // final keys bound to each entry
    bindings.assign(data_of.size(), 0);
    for (size_t method_index = 0; method_index < input.program->methods.size(); ++method_index) {
      auto& method = input.program->methods[method_index];
      const std::string& method_name = method->name;
      buffer_decls.add_method(
          *method, [&](const std::string& key) { return out.state.count(key) > 0; }, state_key,
          decl_problems);
      if (!decl_problems.empty())
        throw Error(ErrorCode::conflict, input.name + ": " + decl_problems.front());
      // Data checks use the source keys, before renaming.
      for (const auto& c : method->constants) {
        const TensorData* data = data_of.data(c->data_key);
        if (data == nullptr) continue;
        auto problem = constant_data_problem(*c, *data, method_name, input.name);
        if (!problem.empty()) throw Error(ErrorCode::invalid_input, problem);
      }
      std::unordered_map<std::string_view, const nb::TensorValueT*> value_named;
      if (!method->mutable_buffers.empty()) {
        for (const auto& tv : method->graph->tensor_values) value_named.emplace(tv->name, tv.get());
      }
      for (const auto& buffer : method->mutable_buffers) {
        const TensorData* data = data_of.data(buffer->fqn);
        auto tv = value_named.find(buffer->name);
        if (data == nullptr || tv == value_named.end()) continue;
        auto problem = tensor_data_problem(
            *tv->second->meta, *data,
            fmt::format("{}: method {}: mutable buffer {} (key {})", input.name, quote(method_name),
                        quote(buffer->name), quote(buffer->fqn)));
        if (!problem.empty()) throw Error(ErrorCode::invalid_input, problem);
      }
      for_each_tensor_meta(*method, [&](const nb::TensorMetaT& meta, std::string_view name) {
        auto found = quant_data_problems(meta, name, data_of, method_name, input.name);
        if (!found.empty()) throw Error(ErrorCode::invalid_input, found.front());
      });
      for_each_data_key(*method, [&](std::string& key, KeyRole role) {
        bool mut = is_mutable(key);
        std::string final_name = final_key(method_name, key, mut);
        const bool renamed = final_name != key;
        auto o = origin.find(final_name);
        if (o != origin.end() && o->second.source(o->first) != key) {
          fail(ErrorCode::conflict, "{}: method {}: keys {} and {} both become {}", input.name,
               quote(method_name), quote(std::string(o->second.source(o->first))), quote(key),
               quote(final_name));
        }
        bool tensor_role =
            role == KeyRole::constant || role == KeyRole::scale || role == KeyRole::zero_point;
        if (tensor_role && mut) needs_data.push_back(final_name);
        if (mut && (role == KeyRole::constant || role == KeyRole::mutable_buffer))
          declared_state.insert(final_name);
        if (role == KeyRole::mutation_target) {
          mutation_targets.emplace_back(
              fmt::format("{}: method {}", input.name, quote(method_name)), final_name);
        }
        size_t entry = data_of.find(key);
        if (entry == TensorLookup::npos && tensor_role && !mut) {
          fail_input("{}: method {}: {} key {} has no data", input.name, quote(method_name),
                     key_role_name(role), quote(key));
        }
        if (renamed) {
          // Within a method a final key has one source (or the merge failed above).
          if (o == origin.end() || o->second.listed_for != method_index) {
            ++out.renamed_keys;
            if (list_renames) renames.push_back({method_name, key, final_name});
          }
          key = std::move(final_name);
        }
        // From here `key` is the final key.
        if (o == origin.end()) o = origin.emplace(key, Origin{renamed}).first;
        if (renamed) o->second.listed_for = method_index;
        if (entry != TensorLookup::npos) {
          const TensorData& data = data_of.entry(entry).second;
          auto [b, first] = bound.emplace(key, Binding{&data, input_index, entry, &method_name});
          used[entry] = true;
          if (first) ++bindings[entry];
          if (!first && b->second.input != input_index) {
            const auto& prev = b->second;
            bool same = prev.data->dtype == data.dtype && prev.data->shape == data.shape &&
                        same_bytes(prev.data->bytes, data.bytes);
            if (!same) {
              fail(ErrorCode::conflict,
                   "{}: state key {}: initial data differs between {} (method {}) and {} (method "
                   "{})",
                   input.name, quote(key), prev.data->bytes.file->name(), quote(*prev.method),
                   data.bytes.file->name(), quote(method_name));
            }
          }
        }
      });
    }
    for (size_t i = 0; i < used.size(); ++i) {
      if (!used[i]) {
        ++out.dropped_keys;
        out.dropped_bytes += data_of.entry(i).second.bytes.size;
      }
    }
  }
  for (const auto& [where, key] : mutation_targets) {
    if (!declared_state.count(key)) {
      fail_input(
          "{}: buffer mutation target {} names no buffer (no constant or MutableBufferSpec "
          "declares it)",
          where, quote(key));
    }
  }
  const std::string* unbound = nullptr;  // the smallest, so the message never depends on order
  for (const auto& key : needs_data) {
    if (!bound.count(key) && (unbound == nullptr || key < *unbound)) unbound = &key;
  }
  if (unbound != nullptr) {
    fail_input("{}: state key {} is read as a tensor but no input provides its data",
               inputs.front().name, quote(*unbound));
  }

  // Sorted first, so the ordered table is filled at its end instead of searched;
  // each binding's key moves into the table and its node is freed. An input's
  // entry bound once (or bound for the last time) moves into the table whole,
  // node and all, so the input's table empties as the merged one fills.
  std::vector<decltype(bound)::node_type> by_key;
  by_key.reserve(bound.size());
  while (!bound.empty()) by_key.push_back(bound.extract(bound.begin()));
  std::sort(by_key.begin(), by_key.end(),
            [](const auto& a, const auto& b) { return a.key() < b.key(); });
  std::vector<std::vector<TensorTable::iterator>> entry_at(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    entry_at[i].reserve(inputs[i].data.size());
    for (auto it = inputs[i].data.begin(); it != inputs[i].data.end(); ++it)
      entry_at[i].push_back(it);
  }
  for (auto& binding : by_key) {
    const Binding& b = binding.mapped();
    if (--bindings_per_entry[b.input][b.entry] > 0) {
      out.tensors.emplace_hint(out.tensors.end(), std::string(binding.key()), *b.data);
    } else {
      auto node = inputs[b.input].data.extract(entry_at[b.input][b.entry]);
      node.key().assign(binding.key());
      out.tensors.insert(out.tensors.end(), std::move(node));
    }
    binding = {};
  }
  out.renames.reserve(renames.size());
  while (!renames.empty()) {
    out.renames.push_back(std::move(renames.front()));
    renames.pop_front();
  }
  for (auto& input : inputs) {
    for (auto& method : input.program->methods) out.program->methods.push_back(std::move(method));
  }
  return out;
}

}  // namespace ptepack
