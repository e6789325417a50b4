// Small pieces every verifier uses: problems collected instead of thrown, .ptd notes.
#pragma once

#include <string>
#include <vector>

#include "ptepack/base/error.h"
#include "ptepack/containers/flat_tensor.h"

namespace ptepack {

// Runs fn; an Error it throws becomes a problem line instead, so a verifier
// goes on to report everything else. Returns whether fn completed.
template <typename Fn>
bool attempt(std::vector<std::string>& problems, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const Error& e) {
    problems.emplace_back(e.what());
    return false;
  }
}

// Segments of a .ptd that no NamedData points at: valid FlatTensor, never written by ptepack.
void note_unreferenced_segments(const ptd::File& file, std::vector<std::string>& notes);

}  // namespace ptepack
