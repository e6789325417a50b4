// One execution plan of a .pte against another, field by field, as the runtime uses them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ptepack/diff/diff.h"
#include "ptepack/hash/sha256.h"
#include "ptepack/pte/pte.h"

namespace ptepack::detail {

// A program with the digests of the bytes it computes with, wherever they live.
struct ProgramView {
  const pte::Program* program = nullptr;
  // (plan, value) -> index into program->tensors
  std::map<std::pair<uint32_t, uint32_t>, size_t> tensor_at;
  std::vector<Digest> tensor_digest;  // parallel to program->tensors; unset without bytes
  // (plan, delegate index in the plan) -> digest of the processed blob and its size
  std::map<std::pair<uint32_t, uint32_t>, std::pair<Digest, uint64_t>> delegate_blob;
};

// Collects differences under one program and method, up to the diff's limit.
class Reporter {
 public:
  Reporter(ArtifactDiff& diff, std::string program, std::string method)
      : diff_(diff), program_(std::move(program)), method_(std::move(method)) {}
  void add(DifferenceKind what, std::string text);
  // What differs without changing a computation (the diff's notes).
  void note(const std::string& text);
  // diff --method: a buffer moved to the shared state (memory id 2) and the arena
  // added to non_const_buffer_sizes are notes (the method computes the same on
  // its own); in a whole-program diff they are differences (sharing changes what
  // a sequence of methods computes).
  bool shared_state_as_notes = false;
  [[nodiscard]] bool any() const { return found_ > 0; }

 private:
  ArtifactDiff& diff_;
  std::string program_;
  std::string method_;
  uint64_t found_ = 0;
};

// Reports how plan `pb` of `b` differs from plan `pa` of `a` in anything a
// computation could show: inputs, outputs, container metadata, every value,
// every instruction (operators resolved by name and overload), delegates,
// non-constant buffers. Value indices, debug data and where bytes live are not
// compared; stored bytes are compared by digest.
void compare_plans(const ProgramView& a, uint32_t pa, const ProgramView& b, uint32_t pb,
                   Reporter& report);

// "1,234": digits grouped by thousands, for byte counts in messages.
[[nodiscard]] std::string grouped(uint64_t value);

}  // namespace ptepack::detail
