// Which data keys a program references, from which methods, in which roles, and which are mutable.
#pragma once

#include <map>
#include <set>
#include <string>

#include "ptepack/formats/program.h"
#include "ptepack/model/program_walk.h"

namespace ptepack {

struct KeyUse {
  std::set<std::string> methods;
  std::set<KeyRole> roles;
  // Read as a tensor (constant, scale or zero point): needs data.
  [[nodiscard]] bool needs_data() const {
    return roles.count(KeyRole::constant) || roles.count(KeyRole::scale) ||
           roles.count(KeyRole::zero_point);
  }
};

struct ProgramKeys {
  std::map<std::string, KeyUse> keys;  // every referenced key as written
  std::set<std::string> mutated;       // keys some method mutates (rule 1), as written
};

[[nodiscard]] ProgramKeys analyze_program_keys(const nb::ProgramT& program);

}  // namespace ptepack
