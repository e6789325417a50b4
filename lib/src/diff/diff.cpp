// diff: two artifacts compared by content: .pte programs by what the runtime computes with,
// program graphs by methods, keys (by digest) and state, packed directories also by file.
#include "ptepack/diff/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "diff/diff_pte.h"
#include "graph/program_keys.h"
#include "hash/parallel_hash.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "ptepack/verify/reader.h"

namespace ptepack {
namespace {

std::string key_aspects_text(const std::vector<KeyAspect>& aspects) {
  std::vector<std::string_view> names;
  for (auto a : aspects) names.push_back(key_aspect_name(a));
  return fmt::format("{}", fmt::join(names, ", "));
}

// What diff compares of a program graph or data file.
struct Content {
  std::map<std::string, const nb::Method*> methods;
  std::map<std::string, KeyState> keys;
  std::set<std::string> state;
};

Content content_of(const Artifact& artifact, unsigned jobs) {
  Content c;
  if (artifact.program) {
    for (const auto& m : access::methods(artifact.program.root()))
      c.methods.emplace(access::name(m), &m);
    for (const auto key : ProgramKeys(artifact.program.root()).mutated()) c.state.emplace(key);
  }
  if (artifact.manifest) {
    for (const auto& key : artifact.manifest->state) c.state.insert(key);
  }
  RangeDigests digests;
  bool hashing = false;
  for (const auto& [key, data] : artifact.data) {
    if (!data.expected_sha256) {
      digests.add(data.bytes);
      hashing = true;
    }
    c.keys.emplace(key, KeyState{data.dtype, data.shape, data.bytes.size,
                                 data.expected_sha256 ? to_hex(*data.expected_sha256) : ""});
  }
  if (hashing) {
    digests.compute(jobs, nullptr);
    for (auto& [key, state] : c.keys) {
      if (state.sha256.empty()) state.sha256 = to_hex(digests.of(artifact.data.at(key).bytes));
    }
  }
  return c;
}

// Equal as programs, whatever their encoding: compared as object trees, one
// method of each side at a time.
bool same_method(const nb::Method& a, const nb::Method& b) {
  const std::unique_ptr<nb::MethodT> x(a.UnPack());
  const std::unique_ptr<nb::MethodT> y(b.UnPack());
  return *x == *y;
}

template <typename Map, typename OnlyA, typename OnlyB, typename Both>
void merge_walk(const Map& a, const Map& b, OnlyA only_a, OnlyB only_b, Both both) {
  auto x = a.begin();
  auto y = b.begin();
  while (x != a.end() || y != b.end()) {
    if (y == b.end() || (x != a.end() && x->first < y->first)) {
      only_a(*x++);
    } else if (x == a.end() || y->first < x->first) {
      only_b(*y++);
    } else {
      both(*x++, *y++);
    }
  }
}

// Program graphs and data files: methods (as object trees), keys by digest, state.
void diff_graphs(const Artifact& a, const Artifact& b, unsigned jobs, ArtifactDiff& d) {
  auto left = content_of(a, jobs);
  auto right = content_of(b, jobs);
  std::vector<MethodChange> by_change[3];  // added, removed, changed; each by name
  auto record = [&](const std::string& name, Change change) {
    by_change[static_cast<size_t>(change)].push_back({"", name, change});
  };
  merge_walk(
      left.methods, right.methods, [&](const auto& m) { record(m.first, Change::removed); },
      [&](const auto& m) { record(m.first, Change::added); },
      [&](const auto& x, const auto& y) {
        if (!same_method(*x.second, *y.second)) record(x.first, Change::changed);
      });
  for (auto& list : by_change) d.methods.insert(d.methods.end(), list.begin(), list.end());
  merge_walk(
      left.keys, right.keys,
      [&](const auto& k) {
        d.keys.push_back({k.first, Change::removed, {}, k.second, std::nullopt});
      },
      [&](const auto& k) {
        d.keys.push_back({k.first, Change::added, {}, std::nullopt, k.second});
      },
      [&](const auto& x, const auto& y) {
        KeyChange change{x.first, Change::changed, {}, x.second, y.second};
        if (x.second.sha256 != y.second.sha256) change.changes.push_back(KeyAspect::bytes);
        if (x.second.dtype != y.second.dtype) change.changes.push_back(KeyAspect::dtype);
        if (x.second.shape != y.second.shape) change.changes.push_back(KeyAspect::shape);
        if (!change.changes.empty()) d.keys.push_back(std::move(change));
      });
  std::set_difference(right.state.begin(), right.state.end(), left.state.begin(), left.state.end(),
                      std::back_inserter(d.state_added));
  std::set_difference(left.state.begin(), left.state.end(), right.state.begin(), right.state.end(),
                      std::back_inserter(d.state_removed));
  // Every verdict of "differ" lists what differs, in the one list every artifact kind has.
  auto add = [&](std::string method, DifferenceKind what, std::string text) {
    if (d.differences.size() >= ArtifactDiff::kMaxDifferences) {
      ++d.differences_omitted;
      return;
    }
    d.differences.push_back({"", std::move(method), what, std::move(text)});
  };
  for (const auto& m : d.methods) {
    add(m.method, DifferenceKind::method, fmt::format("method {}", change_name(m.change)));
  }
  for (const auto& k : d.keys) {
    add("", DifferenceKind::key,
        k.change == Change::changed
            ? fmt::format("key {}: {} changed", quote(k.key), key_aspects_text(k.changes))
            : fmt::format("key {} {}", quote(k.key), change_name(k.change)));
  }
  for (const auto& n : d.state_added) {
    add("", DifferenceKind::state, fmt::format("state key {} added", quote(n)));
  }
  for (const auto& n : d.state_removed) {
    add("", DifferenceKind::state, fmt::format("state key {} removed", quote(n)));
  }
}

bool holds_pte(const Artifact& a) {
  return a.kind == ArtifactKind::pte || a.kind == ArtifactKind::pte_directory;
}

}  // namespace

std::string_view change_name(Change change) {
  switch (change) {
    case Change::added:
      return "added";
    case Change::removed:
      return "removed";
    case Change::changed:
      return "changed";
  }
  return "";
}

// The JSON and text names of the enums, one table each.
std::string_view key_aspect_name(KeyAspect aspect) {
  static constexpr std::array<std::string_view, 3> kNames = {"bytes", "dtype", "shape"};
  return kNames.at(static_cast<size_t>(aspect));
}

std::string_view difference_kind_name(DifferenceKind kind) {
  static constexpr std::array<std::string_view, 10> kNames = {
      "plan",       "value",   "chain",  "instruction", "delegate",
      "named_data", "program", "method", "key",         "state"};
  return kNames.at(static_cast<size_t>(kind));
}

bool ArtifactDiff::equivalent() const {
  return methods.empty() && keys.empty() && state_added.empty() && state_removed.empty() &&
         differences.empty() && differences_omitted == 0;
}

ArtifactDiff diff_artifacts(const DiffSide& a, const DiffSide& b, unsigned jobs,
                            const std::optional<MethodPair>& method) {
  // A packed directory is compared on its manifest's digests, so the reader checks it
  // whole, as verify checks it: a damaged side is an error, never a verdict.
  ReadOptions read;
  read.jobs = jobs;
  auto left = load_artifact(a.path, a.data, true, ProgramForm::buffer, read);
  auto right = load_artifact(b.path, b.data, true, ProgramForm::buffer, read);
  ArtifactDiff d;
  d.a = left.name;
  d.b = right.name;
  for (const auto* side : {&left, &right})
    d.notes.insert(d.notes.end(), side->checked.begin(), side->checked.end());
  for (const auto* side : {&left, &right}) {
    for (const auto& note : side->notes) d.notes.push_back(fmt::format("{}: {}", side->name, note));
  }
  if (method) {
    for (const auto* side : {&left, &right}) {
      if (!holds_pte(*side)) {
        fail(ErrorCode::usage, "{}: --method compares methods of .pte programs; this is a {}",
             side->name, artifact_kind_name(side->kind));
      }
    }
    detail::diff_method(left, right, *method, jobs, d);
    return d;
  }
  if (holds_pte(left) && holds_pte(right)) {
    detail::diff_programs(left, right, jobs, d);
  } else if (holds_pte(left) || holds_pte(right)) {
    d.differences.push_back(
        {"", "", DifferenceKind::program,
         fmt::format("{} is a {}, {} a {}: they share no computation", d.a,
                     artifact_kind_name(left.kind), d.b, artifact_kind_name(right.kind))});
  } else {
    diff_graphs(left, right, jobs, d);
  }
  if (left.manifest && right.manifest)
    d.files = file_delta(release_files(*left.manifest), release_files(*right.manifest));
  return d;
}

}  // namespace ptepack
