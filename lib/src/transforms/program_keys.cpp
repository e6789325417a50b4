// Key reference analysis over every method of a program.
#include "ptepack/transforms/program_keys.h"

namespace ptepack {

ProgramKeys analyze_program_keys(const nb::ProgramT& program) {
  ProgramKeys out;
  for (const auto& method : program.methods) {
    for (const auto& c : method->constants) {
      if (c->mutated) out.mutated.insert(c->data_key);
    }
    for_each_data_key(*method, [&](const std::string& key, KeyRole role) {
      auto& use = out.keys[key];
      use.methods.insert(method->name);
      use.roles.insert(role);
      if (role == KeyRole::mutable_buffer || role == KeyRole::mutation_target)
        out.mutated.insert(key);
    });
  }
  return out;
}

}  // namespace ptepack
