// Which data keys a program references, from which methods, in which roles, and which are mutable.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ptepack/graph/program.h"
#include "graph/program_walk.h"

namespace ptepack {

// The key references of a verified program flatbuffer, one compact entry per
// key (a few words: a program can reference millions). Keys and method names
// are views into the flatbuffer, which must outlive this.
class ProgramKeys {
 public:
  struct Use {
    std::string_view key;
    uint32_t methods_begin = 0;  // the methods referencing it, as method_names() indices
    uint32_t methods_count = 0;
    uint8_t roles = 0;     // bit (1 << role) for each KeyRole it is referenced in
    bool mutated = false;  // some method mutates it (rule 1)

    [[nodiscard]] bool has(KeyRole role) const {
      return (roles & (1U << static_cast<unsigned>(role))) != 0;
    }
    // Read as a tensor (constant, scale or zero point): needs data.
    [[nodiscard]] bool needs_data() const {
      return has(KeyRole::constant) || has(KeyRole::scale) || has(KeyRole::zero_point);
    }
  };

  ProgramKeys() = default;
  explicit ProgramKeys(const nb::Program& program);

  // Every referenced key as written, once each, in bytewise key order.
  [[nodiscard]] const std::vector<Use>& uses() const { return uses_; }
  [[nodiscard]] const Use* find(std::string_view key) const;
  [[nodiscard]] bool is_mutated(std::string_view key) const;
  // Every key some method mutates, in key order.
  [[nodiscard]] std::vector<std::string_view> mutated() const;
  // The distinct names of the methods referencing the key, sorted; the i-th
  // of them (i < use.methods_count) without building the list.
  [[nodiscard]] std::vector<std::string_view> methods(const Use& use) const;
  [[nodiscard]] std::string_view method(const Use& use, uint32_t i) const {
    return method_names_[methods_[use.methods_begin + i]];
  }
  [[nodiscard]] bool referenced_by(const Use& use, std::string_view method) const;

 private:
  std::vector<Use> uses_;
  std::vector<uint32_t> methods_;  // per use, the indices of its methods' distinct names
  std::vector<std::string_view> method_names_;  // distinct, sorted
};

[[nodiscard]] inline ProgramKeys analyze_program_keys(const nb::Program& program) {
  return ProgramKeys(program);
}

}  // namespace ptepack
