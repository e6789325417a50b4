// Small pieces every reader uses: problems into its Diagnostics instead of thrown, .ptd notes.
#pragma once

#include <string>
#include <vector>

#include "containers/flat_tensor.h"
#include "ptepack/base/error.h"
#include "ptepack/verify/verify.h"
#include "verify/diagnostics.h"

namespace ptepack {

// The kind of problem an Error thrown while reading `file` is: a file that
// cannot be opened or read (ErrorCode::io) is missing; anything else is `id`.
inline ProblemId problem_of(const Error& e, ProblemId id) {
  return e.code() == ErrorCode::io ? ProblemId::file_missing : id;
}

// Runs fn; an Error it throws becomes a problem in `file` instead (its kind
// from problem_of), so a verifier goes on to report everything else. Returns
// whether fn completed. A problem a strict reader raised inside fn goes on as it is.
template <typename Fn>
bool attempt(Diagnostics& problems, ProblemId id, const std::string& file, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const ProblemError&) {
    throw;
  } catch (const Error& e) {
    problems.add({problem_of(e, id), file, e.what()});
    return false;
  }
}

// Lines a lower layer's check returned (program rules), as problems of kind `id` in `file`.
inline void add_lines(Diagnostics& problems, ProblemId id, const std::string& file,
                      std::vector<std::string> lines) {
  for (auto& line : lines) problems.add({id, file, std::move(line)});
}

// Runs check(lines), a lower layer's check that appends lines, and records
// them as problems of kind `id` in `file`: also those it appended before it
// threw (the exception then goes on, as when it wrote into the problems).
template <typename Check>
void record_lines(Diagnostics& problems, ProblemId id, const std::string& file, Check&& check) {
  std::vector<std::string> lines;
  try {
    check(lines);
  } catch (...) {
    add_lines(problems, id, file, std::move(lines));
    throw;
  }
  add_lines(problems, id, file, std::move(lines));
}

// Segments of a .ptd that no NamedData points at: valid FlatTensor, never written by ptepack.
void note_unreferenced_segments(const ptd::File& file, std::vector<std::string>& notes);

}  // namespace ptepack
