// Notes verify gives on .ptd files it reads.
#include "verify/verify_support.h"

#include <fmt/format.h>

namespace ptepack {

void note_unreferenced_segments(const ptd::File& file, std::vector<std::string>& notes) {
  for (size_t s = 0; s < file.segments.size(); ++s) {
    if (file.segment_keys[s] == 0) {
      notes.push_back(fmt::format("{}: segment {} ({} bytes) is referenced by no key", file.name, s,
                                  file.segments[s].size));
    }
  }
}

}  // namespace ptepack
