// `diff`: whether anything a runtime computes with differs between two artifacts, by content.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/core/release_files.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack {

// One side of an artifact to compare: a path and, for a program, its data
// files (`PATH@DATA,...`; empty: the same defaults as pack).
struct DiffSide {
  std::filesystem::path path;
  std::vector<std::filesystem::path> data;
};

enum class Change : uint8_t { added, removed, changed };
[[nodiscard]] std::string_view change_name(Change change);

// What of a changed key differs, in this order.
enum class KeyAspect : uint8_t { bytes, dtype, shape };
[[nodiscard]] std::string_view key_aspect_name(KeyAspect aspect);

// What a difference is about (`diff --json`'s `what`, schema/diff.schema.json).
enum class DifferenceKind : uint8_t {
  plan,
  value,
  chain,
  instruction,
  delegate,
  named_data,
  program,
  method,
  key,
  state,
};
[[nodiscard]] std::string_view difference_kind_name(DifferenceKind kind);

// One side of a changed key.
struct KeyState {
  DType dtype = DType::BYTE;
  Shape shape;
  uint64_t nbytes = 0;
  std::string sha256;
};

// A key of a program graph or data file (`.pte` programs are compared by
// content, never by key name).
struct KeyChange {
  std::string key;
  Change change = Change::changed;
  std::vector<KeyAspect> changes;    // changed: what differs, in KeyAspect's order
  std::optional<KeyState> a;         // absent when added
  std::optional<KeyState> b;         // absent when removed
};

struct MethodChange {
  std::string program;  // .pte programs: the file of side B (A when removed); else empty
  std::string method;
  Change change = Change::changed;
};

// .pte programs of the two sides: paired by file name, or the only two.
struct ProgramMatch {
  std::string a;  // empty: added in B
  std::string b;  // empty: removed from A
};

// One thing a computation could tell apart, in terms a person can act on.
struct Difference {
  std::string program;  // the program's file on side B (.pte); empty for program graphs
  std::string method;   // empty: the program as a whole
  DifferenceKind what = DifferenceKind::plan;
  std::string text;     // e.g. "instruction 12 aten::add.out -> aten::sub.out"
};

struct ArtifactDiff {
  std::string a;
  std::string b;
  std::vector<ProgramMatch> programs;  // .pte artifacts
  std::vector<MethodChange> methods;
  std::vector<KeyChange> keys;  // program graphs and data files
  std::vector<std::string> state_added;
  std::vector<std::string> state_removed;
  // Every difference up to kMaxDifferences (the rest counted); the text lists the
  // first kListedDifferences and says how many more --json has.
  std::vector<Difference> differences;
  uint64_t differences_omitted = 0;
  // What differs without changing any computation (version, storage, key names, debug data).
  std::vector<std::string> notes;
  std::optional<FileDelta> files;  // both sides packed directories

  static constexpr size_t kMaxDifferences = 100000;
  static constexpr size_t kListedDifferences = 40;

  // Nothing a computation could tell apart; where bytes are stored does not count.
  [[nodiscard]] bool equivalent() const;
};

// Reads both artifacts and compares them. Tensor bytes are compared by SHA-256,
// hashed with `jobs` threads; a packed directory is first checked whole as
// verify checks it (every file and tensor against its manifest), and then
// compared on the manifest's digests. Throws Error when either side cannot be
// read or is damaged (the first problem verify lists, with its exit code), or when a
// program's EXTERNAL tensor or named data cannot be resolved (invalid_input).
//
// With `method` (`diff --method M` or `M=N`), both sides are .pte artifacts and
// only method `method->a` of A and `method->b` of B are compared (each in the
// one program of its side that has it): their plans, and the named data their
// delegates name in their blobs; other methods and data are not looked at. A
// method no program of a side has is a usage error listing those there are.
struct MethodPair {
  std::string a;
  std::string b;
};
[[nodiscard]] ArtifactDiff diff_artifacts(const DiffSide& a, const DiffSide& b, unsigned jobs,
                                          const std::optional<MethodPair>& method = {});

[[nodiscard]] std::string render_diff_text(const ArtifactDiff& diff);
// {"format": "ptepack.diff", "version": 2, ...}: schema/diff.schema.json.
[[nodiscard]] std::string render_diff_json(const ArtifactDiff& diff);

}  // namespace ptepack
