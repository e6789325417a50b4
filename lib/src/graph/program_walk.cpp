// Names of key roles for messages.
#include "graph/program_walk.h"

namespace ptepack {

std::string_view key_role_name(KeyRole role) {
  switch (role) {
    case KeyRole::constant:
      return "constant";
    case KeyRole::scale:
      return "quantisation scale";
    case KeyRole::zero_point:
      return "quantisation zero point";
    case KeyRole::mutable_buffer:
      return "mutable buffer";
    case KeyRole::mutation_target:
      return "buffer mutation target";
  }
  return "key";
}

}  // namespace ptepack
