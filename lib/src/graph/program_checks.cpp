// Program-level verification: structure, naming rules, resolvability, data agreement.
#include "graph/program_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <string_view>

#include "ptepack/base/error.h"
#include "graph/validate.h"

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

}  // namespace ptepack
