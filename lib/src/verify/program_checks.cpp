// Program-level verification: structure, naming rules, resolvability, data agreement.
#include "program_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <string_view>

#include "ptepack/base/error.h"
#include "ptepack/transforms/validate.h"

namespace ptepack {

void check_packed_program(const nb::Program& program, const ProgramKeys& keys,
                          const TensorLookup& lookup, const std::string& context,
                          std::vector<std::string>& problems) {
  std::set<std::string_view> names;
  for (const auto& method : access::methods(program)) {
    const std::string_view name = access::name(method);
    auto problem = method_name_problem(name);
    if (!problem.empty()) problems.push_back(fmt::format("{}: {}", context, problem));
    if (!names.insert(name).second) {
      problems.push_back(fmt::format("{}: method {} appears twice", context, quote(name)));
    }
    auto structure = validate_method_structure(method, context);
    problems.insert(problems.end(), structure.begin(), structure.end());
  }
  if (access::methods(program).empty())
    problems.push_back(fmt::format("{}: program has no methods", context));

  for (const auto& use : keys.uses()) {
    const std::string_view key = use.key;
    if (use.mutated && !key.starts_with("state/")) {
      problems.push_back(
          fmt::format("{}: mutable key {} is not in the state/ namespace", context, quote(key)));
    }
    // The method list, for messages only (most keys have none to report).
    auto methods = [&] { return fmt::format("{}", fmt::join(keys.methods(use), ", ")); };
    if (!use.mutated) {
      if (use.methods_count > 1) {
        problems.push_back(fmt::format("{}: immutable key {} is referenced by several methods ({})",
                                       context, quote(key), methods()));
      }
      for (uint32_t i = 0; i < use.methods_count; ++i) {
        const std::string_view method = keys.method(use, i);
        if (!key.starts_with(method) || key.substr(method.size(), 1) != "/") {
          problems.push_back(
              fmt::format("{}: method {}: immutable key {} is not in the {}/ namespace", context,
                          quote(method), quote(key), method));
        }
      }
    }
    if (use.has(KeyRole::mutation_target) && !use.has(KeyRole::constant) &&
        !use.has(KeyRole::mutable_buffer)) {
      problems.push_back(fmt::format("{}: buffer mutation target {} (method {}) names no buffer",
                                     context, quote(key), methods()));
    }
    if (use.needs_data() && lookup.find(key) == TensorLookup::npos) {
      problems.push_back(
          fmt::format("{}: key {} (method {}) has no data", context, quote(key), methods()));
    }
  }
  BufferDeclarations decls;
  for (const auto& method : access::methods(program)) {
    const std::string_view method_name = access::name(method);
    decls.add_method(
        method, [&](std::string_view k) { return keys.is_mutated(k); },
        [](std::string_view k) { return k; }, problems);
    for (const auto& c : access::constants(method)) {
      const TensorData* tensor = lookup.data(access::data_key(c));
      if (tensor == nullptr) continue;
      auto problem = constant_data_problem(c, *tensor, method_name, context);
      if (!problem.empty()) problems.push_back(std::move(problem));
    }
    for_each_tensor_meta(method, [&](const nb::TensorMeta& meta, std::string_view name) {
      auto found = quant_data_problems(meta, name, lookup, method_name, context);
      problems.insert(problems.end(), found.begin(), found.end());
    });
  }
  // Both are ordered by key: one walk finds the stored keys nothing references.
  auto use = keys.uses().begin();
  for (size_t i = 0; i < lookup.size(); ++i) {
    const std::string& key = lookup.entry(i).first;
    while (use != keys.uses().end() && use->key < key) ++use;
    if (use == keys.uses().end() || use->key != key) {
      problems.push_back(
          fmt::format("{}: key {} is stored but no method references it", context, quote(key)));
    }
  }
}

void check_program_data(const pte::Program& program, const std::string& context,
                        const std::vector<DataFile>& files,
                        const std::vector<std::string>& named_keys, bool packed,
                        std::vector<std::string>& problems) {
  auto lookup = [&](const std::string& key, const std::string& what) -> const TensorData* {
    const TensorData* found = nullptr;
    std::vector<std::string> in;
    for (const auto& f : files) {
      if (auto it = f.tensors->find(key); it != f.tensors->end()) {
        found = &it->second;
        in.push_back(f.name);
      }
    }
    if (in.empty()) {
      problems.push_back(
          fmt::format("{}: {} {} is in none of its data files", context, what, quote(key)));
    } else if (in.size() > 1) {
      problems.push_back(fmt::format("{}: {} {} is in {} of its data files ({}): a load error",
                                     context, what, quote(key), in.size(), fmt::join(in, ", ")));
    }
    return found;
  };
  for (const auto& t : program.tensors) {
    const std::string at = fmt::format("method {} value {}", quote(program.plans[t.plan]), t.value);
    if (t.storage == pte::Storage::external) {
      const TensorData* d = lookup(t.fqn, at + ": EXTERNAL tensor");
      const auto order = normalized_dim_order(t.dim_order);
      if (d != nullptr &&
          (d->opaque || d->dtype != t.dtype || d->shape != t.shape || d->dim_order != order)) {
        problems.push_back(
            fmt::format("{}: {}: EXTERNAL tensor {}: data file layout {} [{}] differs from the "
                        "tensor's {} [{}]",
                        context, at, quote(t.fqn), d->opaque ? "none" : dtype_name(d->dtype),
                        fmt::join(d->shape, ", "), dtype_name(t.dtype), fmt::join(t.shape, ", ")));
      }
    } else if (packed && t.nbytes > 0 &&
               (t.storage == pte::Storage::constant_segment ||
                t.storage == pte::Storage::constant_buffer)) {
      problems.push_back(fmt::format("{}: {}: a {}-byte constant is still stored in the program",
                                     context, at, t.nbytes));
    }
  }
  for (const auto& key : named_keys) lookup(key, "named data");
  if (packed && !program.named_data.empty()) {
    problems.push_back(fmt::format("{}: {} named-data entries are still stored in the program",
                                   context, program.named_data.size()));
  }
}

void note_unreferenced_segments(const ptd::File& file, std::vector<std::string>& notes) {
  for (size_t s = 0; s < file.segments.size(); ++s) {
    if (file.segment_keys[s] == 0) {
      notes.push_back(fmt::format("{}: segment {} ({} bytes) is referenced by no key", file.name, s,
                                  file.segments[s].size));
    }
  }
}

}  // namespace ptepack
