// Key reference analysis over every method of a program.
#include "graph/program_keys.h"

#include <algorithm>

namespace ptepack {

ProgramKeys::ProgramKeys(const nb::Program& program) {
  for (const auto& method : access::methods(program)) method_names_.push_back(access::name(method));
  std::sort(method_names_.begin(), method_names_.end());
  method_names_.erase(std::unique(method_names_.begin(), method_names_.end()), method_names_.end());

  // Every reference (key, method, role), then grouped by key.
  struct Reference {
    std::string_view key;
    uint32_t method;
    uint8_t role;
    bool mutated;
  };
  // Counted first: the lists are sized once (a grown list briefly holds two copies).
  size_t count = 0;
  for (const auto& method : access::methods(program)) {
    for (const auto& c : access::constants(method)) count += access::mutated(c) ? 1U : 0U;
    for_each_data_key(method, [&count](std::string_view, KeyRole) { ++count; });
  }
  std::vector<Reference> references;
  references.reserve(count);
  for (const auto& method : access::methods(program)) {
    const std::string_view name = access::name(method);
    const auto m = static_cast<uint32_t>(
        std::lower_bound(method_names_.begin(), method_names_.end(), name) - method_names_.begin());
    for (const auto& c : access::constants(method)) {
      if (access::mutated(c)) references.push_back({access::data_key(c), m, uint8_t{0}, true});
    }
    for_each_data_key(method, [&](std::string_view key, KeyRole role) {
      const bool mutates = role == KeyRole::mutable_buffer || role == KeyRole::mutation_target;
      references.push_back(
          {key, m, static_cast<uint8_t>(1U << static_cast<unsigned>(role)), mutates});
    });
  }
  std::sort(references.begin(), references.end(), [](const Reference& a, const Reference& b) {
    return a.key != b.key ? a.key < b.key : a.method < b.method;
  });
  size_t keys = 0;
  size_t key_methods = 0;
  for (size_t i = 0; i < references.size(); ++i) {
    const bool new_key = i == 0 || references[i].key != references[i - 1].key;
    keys += new_key ? 1U : 0U;
    key_methods +=
        references[i].role != 0 && (new_key || references[i].method != references[i - 1].method ||
                                    references[i - 1].role == 0);
  }
  uses_.reserve(keys);
  methods_.reserve(key_methods);
  for (size_t i = 0; i < references.size();) {
    Use use{references[i].key, static_cast<uint32_t>(methods_.size()), 0, 0, false};
    for (; i < references.size() && references[i].key == use.key; ++i) {
      const auto& r = references[i];
      use.roles = static_cast<uint8_t>(use.roles | r.role);
      use.mutated = use.mutated || r.mutated;
      if (r.role != 0 && (methods_.size() == use.methods_begin || methods_.back() != r.method)) {
        methods_.push_back(r.method);
      }
    }
    use.methods_count = static_cast<uint32_t>(methods_.size()) - use.methods_begin;
    uses_.push_back(use);
  }
}

const ProgramKeys::Use* ProgramKeys::find(std::string_view key) const {
  auto it = std::lower_bound(uses_.begin(), uses_.end(), key,
                             [](const Use& use, std::string_view k) { return use.key < k; });
  return it != uses_.end() && it->key == key ? &*it : nullptr;
}

bool ProgramKeys::is_mutated(std::string_view key) const {
  const Use* use = find(key);
  return use != nullptr && use->mutated;
}

std::vector<std::string_view> ProgramKeys::mutated() const {
  std::vector<std::string_view> out;
  for (const auto& use : uses_) {
    if (use.mutated) out.push_back(use.key);
  }
  return out;
}

std::vector<std::string_view> ProgramKeys::methods(const Use& use) const {
  std::vector<std::string_view> out;
  out.reserve(use.methods_count);
  for (uint32_t i = 0; i < use.methods_count; ++i) out.push_back(method(use, i));
  return out;
}

bool ProgramKeys::referenced_by(const Use& use, std::string_view method) const {
  for (uint32_t i = 0; i < use.methods_count; ++i) {
    if (this->method(use, i) == method) return true;
  }
  return false;
}

}  // namespace ptepack
