// Where a reader's problems go: the one reader of each artifact kind runs in one of two
// modes (docs/architecture.md, "Decisions taken once": how an artifact is read). verify collects
// every problem into its report; dump, diff and pack read strictly and stop at the first, raised
// with verify's line for it, its exit code and its identifier (ProblemError).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ptepack/verify/verify.h"

namespace ptepack {

enum class ReadMode {
  strict,   // the first problem is raised at once (dump, diff, pack)
  collect,  // every problem is listed (verify)
};

class Diagnostics {
 public:
  Diagnostics(ReadMode mode, std::vector<Problem>& problems) : mode_(mode), problems_(problems) {}

  // Records `problem`; in strict mode raises it at once (ProblemError).
  void add(Problem problem) {
    problems_.push_back(std::move(problem));
    if (mode_ == ReadMode::strict) throw ProblemError(problems_.back());
  }
  // Problems a part of the reader collected on its own (a thread's), in their order.
  void add_all(std::vector<Problem> found) {
    for (auto& p : found) add(std::move(p));
  }
  [[nodiscard]] ReadMode mode() const { return mode_; }

 private:
  ReadMode mode_;
  std::vector<Problem>& problems_;
};

}  // namespace ptepack
