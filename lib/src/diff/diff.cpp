// diff: two artifacts compared by content (methods, keys by digest, state, shard files).
#include "ptepack/diff/diff.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "ptepack/base/error.h"
#include "ptepack/base/format_util.h"
#include "ptepack/formats/artifact.h"
#include "ptepack/formats/json_util.h"
#include "ptepack/hash/parallel_hash.h"
#include "ptepack/transforms/program_keys.h"

namespace ptepack {
namespace {

// What diff compares of one artifact.
struct Content {
  std::map<std::string, const nb::Method*> methods;  // program graphs; null for .pte plans
  std::map<std::string, KeyState> keys;
  std::set<std::string> state;
  std::map<std::string, ShardFile> shard_files;  // directories: file -> size
  std::map<std::string, std::string> shard_digests;
  bool directory = false;
};

Content content_of(const Artifact& artifact, unsigned jobs) {
  Content c;
  if (artifact.program) {
    for (const auto& m : access::methods(artifact.program.root()))
      c.methods.emplace(access::name(m), &m);
    for (const auto key : ProgramKeys(artifact.program.root()).mutated()) c.state.emplace(key);
  }
  for (const auto& p : artifact.pte_programs) {
    for (const auto& plan : p.program.plans) c.methods.emplace(plan, nullptr);
  }
  if (artifact.manifest) {
    c.directory = true;
    for (const auto& key : artifact.manifest->state) c.state.insert(key);
    for (const auto& s : artifact.manifest->shards) {
      c.shard_files.emplace(s.file, ShardFile{s.file, s.size});
      c.shard_digests.emplace(s.file, s.sha256);
    }
  }
  RangeDigests digests;
  bool hashing = false;
  for (const auto& [key, data] : artifact.data) {
    const ManifestTensor* listed = nullptr;
    if (artifact.manifest) {
      auto it = artifact.manifest->tensors.find(key);
      if (it != artifact.manifest->tensors.end()) listed = &it->second;
    }
    if (listed == nullptr) {
      digests.add(data.bytes);
      hashing = true;
    }
    c.keys.emplace(key, KeyState{data.dtype, data.shape, data.bytes.size,
                                 listed != nullptr ? to_hex(listed->sha256) : std::string()});
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

}  // namespace

bool ArtifactDiff::equivalent() const {
  return methods_added.empty() && methods_removed.empty() && methods_changed.empty() &&
         keys_added.empty() && keys_removed.empty() && keys_changed.empty() &&
         state_added.empty() && state_removed.empty();
}

ArtifactDiff diff_artifacts(const std::filesystem::path& a, const std::filesystem::path& b,
                            unsigned jobs) {
  auto left_artifact = load_artifact(a);
  auto right_artifact = load_artifact(b);
  auto left = content_of(left_artifact, jobs);
  auto right = content_of(right_artifact, jobs);
  ArtifactDiff d;
  d.a = left_artifact.name;
  d.b = right_artifact.name;
  merge_walk(
      left.methods, right.methods, [&](const auto& m) { d.methods_removed.push_back(m.first); },
      [&](const auto& m) { d.methods_added.push_back(m.first); },
      [&](const auto& x, const auto& y) {
        if (x.second != nullptr && y.second != nullptr && !same_method(*x.second, *y.second)) {
          d.methods_changed.push_back(x.first);
        }
      });
  merge_walk(
      left.keys, right.keys, [&](const auto& k) { d.keys_removed.push_back(k.first); },
      [&](const auto& k) { d.keys_added.push_back(k.first); },
      [&](const auto& x, const auto& y) {
        KeyChange change{x.first, {}, x.second, y.second};
        if (x.second.sha256 != y.second.sha256) change.changes.emplace_back("bytes");
        if (x.second.dtype != y.second.dtype) change.changes.emplace_back("dtype");
        if (x.second.shape != y.second.shape) change.changes.emplace_back("shape");
        if (!change.changes.empty()) d.keys_changed.push_back(std::move(change));
      });
  std::set_difference(right.state.begin(), right.state.end(), left.state.begin(), left.state.end(),
                      std::back_inserter(d.state_added));
  std::set_difference(left.state.begin(), left.state.end(), right.state.begin(), right.state.end(),
                      std::back_inserter(d.state_removed));
  if (left.directory && right.directory) {
    ShardDiff shards;
    merge_walk(
        left.shard_files, right.shard_files,
        [&](const auto& s) { shards.removed.push_back(s.second); },
        [&](const auto& s) { shards.added.push_back(s.second); },
        [&](const auto& x, const auto& y) {
          if (left.shard_digests.at(x.first) == right.shard_digests.at(y.first)) {
            shards.unchanged.push_back(y.second);
          } else {  // same name, other bytes: only a hand-edited directory does this
            shards.removed.push_back(x.second);
            shards.added.push_back(y.second);
          }
        });
    for (const auto& s : shards.added) shards.download_bytes += s.size;
    d.shards = std::move(shards);
  }
  return d;
}

std::string render_diff_text(const ArtifactDiff& d) {
  std::string out;
  auto line = [&out](const std::string& text) { out += text_line(text); };
  line(fmt::format("{} -> {}: {}", d.a, d.b, d.equivalent() ? "equivalent" : "differ"));
  auto names = [&](std::string_view title, const std::vector<std::string>& added,
                   const std::vector<std::string>& removed,
                   const std::vector<std::string>* changed) {
    line(fmt::format("{}: {} added, {} removed{}", title, added.size(), removed.size(),
                     changed ? fmt::format(", {} changed", changed->size()) : std::string()));
    for (const auto& n : added) line("  + " + n);
    for (const auto& n : removed) line("  - " + n);
    if (changed) {
      for (const auto& n : *changed) line("  ~ " + n);
    }
  };
  names("methods", d.methods_added, d.methods_removed, &d.methods_changed);
  line(fmt::format("keys: {} added, {} removed, {} changed", d.keys_added.size(),
                   d.keys_removed.size(), d.keys_changed.size()));
  for (const auto& n : d.keys_added) line("  + " + n);
  for (const auto& n : d.keys_removed) line("  - " + n);
  for (const auto& c : d.keys_changed) {
    std::vector<std::string> parts;
    for (const auto& what : c.changes) {
      if (what == "bytes") {
        parts.push_back(
            fmt::format("bytes {} -> {}", c.a.sha256.substr(0, 12), c.b.sha256.substr(0, 12)));
      } else if (what == "dtype") {
        parts.push_back(
            fmt::format("dtype {} -> {}", dtype_name(c.a.dtype), dtype_name(c.b.dtype)));
      } else {
        parts.push_back(fmt::format("shape [{}] -> [{}]", fmt::join(c.a.shape, ", "),
                                    fmt::join(c.b.shape, ", ")));
      }
    }
    line(fmt::format("  ~ {}: {}", c.key, fmt::join(parts, ", ")));
  }
  names("state keys", d.state_added, d.state_removed, nullptr);
  if (d.shards) {
    const auto& s = *d.shards;
    line(fmt::format("shards: {} new, {} gone, {} unchanged; {} to download again", s.added.size(),
                     s.removed.size(), s.unchanged.size(), human_bytes(s.download_bytes)));
    for (const auto& f : s.added) line(fmt::format("  + {} ({} bytes)", f.file, f.size));
    for (const auto& f : s.removed) line(fmt::format("  - {}", f.file));
  }
  return out;
}

std::string render_diff_json(const ArtifactDiff& d) {
  using json = nlohmann::ordered_json;
  auto state_json = [](const KeyState& s) {
    return json{{"dtype", dtype_name(s.dtype)},
                {"shape", s.shape},
                {"nbytes", s.nbytes},
                {"sha256", s.sha256}};
  };
  json changed = json::array();
  for (const auto& c : d.keys_changed) {
    changed.push_back(
        {{"key", c.key}, {"changes", c.changes}, {"a", state_json(c.a)}, {"b", state_json(c.b)}});
  }
  json j{{"format", "ptepack.diff"},
         {"version", 1},
         {"a", d.a},
         {"b", d.b},
         {"equivalent", d.equivalent()},
         {"methods",
          {{"added", d.methods_added},
           {"removed", d.methods_removed},
           {"changed", d.methods_changed}}},
         {"keys", {{"added", d.keys_added}, {"removed", d.keys_removed}, {"changed", changed}}},
         {"state", {{"added", d.state_added}, {"removed", d.state_removed}}}};
  if (d.shards) {
    auto files = [](const std::vector<ShardFile>& list) {
      json out = json::array();
      for (const auto& f : list) out.push_back({{"file", f.file}, {"size", f.size}});
      return out;
    };
    j["shards"] = {{"added", files(d.shards->added)},
                   {"removed", files(d.shards->removed)},
                   {"unchanged", files(d.shards->unchanged)},
                   {"download_bytes", d.shards->download_bytes}};
  } else {
    j["shards"] = nullptr;
  }
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace ptepack
