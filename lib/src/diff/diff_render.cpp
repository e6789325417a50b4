// diff reports: text for people, JSON (schema/diff.schema.json) for CI.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "ptepack/diff/diff.h"

namespace ptepack {
namespace {

std::string where(const std::string& program, const std::string& method) {
  if (program.empty()) return method;
  return method.empty() ? program : program + " " + method;
}

std::string key_change_text(const KeyChange& c) {
  std::vector<std::string> parts;
  for (const auto what : c.changes) {
    if (what == KeyAspect::bytes) {
      parts.push_back(
          fmt::format("bytes {} -> {}", c.a->sha256.substr(0, 12), c.b->sha256.substr(0, 12)));
    } else if (what == KeyAspect::dtype) {
      parts.push_back(
          fmt::format("dtype {} -> {}", dtype_name(c.a->dtype), dtype_name(c.b->dtype)));
    } else {
      parts.push_back(fmt::format("shape [{}] -> [{}]", fmt::join(c.a->shape, ", "),
                                  fmt::join(c.b->shape, ", ")));
    }
  }
  return fmt::format("{}: {}", c.key, fmt::join(parts, ", "));
}

}  // namespace

std::string render_diff_text(const ArtifactDiff& d) {
  std::string out;
  auto line = [&out](const std::string& text) { out += text_line(text); };
  line(fmt::format("{} -> {}: {}", d.a, d.b, d.equivalent() ? "equivalent" : "differ"));
  // What changed leads; the summaries follow. Program graphs list it by key and
  // method below, so their differences are not repeated here.
  if (!d.differences.empty() && !d.programs.empty()) {
    const uint64_t total = d.differences.size() + d.differences_omitted;
    line(fmt::format("differences: {}", total));
    size_t listed = 0;
    for (const auto& x : d.differences) {
      if (listed++ == ArtifactDiff::kListedDifferences) break;
      const auto at = where(x.program, x.method);
      line(at.empty() ? "  " + x.text : fmt::format("  {}: {}", at, x.text));
    }
    if (total > ArtifactDiff::kListedDifferences) {
      line(fmt::format("  … {} more ({})", total - ArtifactDiff::kListedDifferences,
                       d.differences_omitted > 0 ? "--json lists the first 100,000"
                                                 : "--json lists them all"));
    }
  }
  if (!d.programs.empty()) {
    size_t added = 0;
    size_t removed = 0;
    for (const auto& p : d.programs) {
      added += p.a.empty();
      removed += p.b.empty();
    }
    line(fmt::format("programs: {} compared, {} added, {} removed",
                     d.programs.size() - added - removed, added, removed));
    for (const auto& p : d.programs) {
      if (p.a.empty()) {
        line("  + " + p.b);
      } else if (p.b.empty()) {
        line("  - " + p.a);
      } else {
        line(p.a == p.b ? "  = " + p.a : fmt::format("  = {} -> {}", p.a, p.b));
      }
    }
  }
  size_t count[3] = {0, 0, 0};
  for (const auto& m : d.methods) ++count[static_cast<size_t>(m.change)];
  line(fmt::format("methods: {} added, {} removed, {} changed", count[0], count[1], count[2]));
  for (const auto& m : d.methods) {
    const char* mark = m.change == Change::added ? "+" : m.change == Change::removed ? "-" : "~";
    line(fmt::format("  {} {}", mark, where(m.program, m.method)));
  }
  if (d.programs.empty()) {  // program graphs and data files: keys and state by name
    size_t keys[3] = {0, 0, 0};
    for (const auto& k : d.keys) ++keys[static_cast<size_t>(k.change)];
    line(fmt::format("keys: {} added, {} removed, {} changed", keys[0], keys[1], keys[2]));
    for (const auto& k : d.keys) {
      if (k.change == Change::added) line("  + " + k.key);
    }
    for (const auto& k : d.keys) {
      if (k.change == Change::removed) line("  - " + k.key);
    }
    for (const auto& k : d.keys) {
      if (k.change == Change::changed) line("  ~ " + key_change_text(k));
    }
    line(fmt::format("state keys: {} added, {} removed", d.state_added.size(),
                     d.state_removed.size()));
    for (const auto& n : d.state_added) line("  + " + n);
    for (const auto& n : d.state_removed) line("  - " + n);
  }
  if (d.files) {
    const auto& f = *d.files;
    line(fmt::format("files: {} new, {} gone, {} unchanged; {} to download again", f.added.size(),
                     f.removed.size(), f.unchanged.size(), human_bytes(f.download_bytes)));
    for (const auto& x : f.added) line(fmt::format("  + {} ({} bytes)", x.file, x.size));
    for (const auto& x : f.removed) line(fmt::format("  - {}", x.file));
  }
  if (!d.notes.empty()) {
    line("notes (not differences):");
    for (const auto& n : d.notes) line("  " + n);
  }
  return out;
}

std::string render_diff_json(const ArtifactDiff& d) {
  using json = nlohmann::ordered_json;
  auto text_or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  auto side = [](const std::optional<KeyState>& s) {
    if (!s) return json(nullptr);
    return json{{"dtype", dtype_name(s->dtype)},
                {"shape", s->shape},
                {"nbytes", s->nbytes},
                {"sha256", s->sha256}};
  };
  json programs = json::array();
  for (const auto& p : d.programs)
    programs.push_back({{"a", text_or_null(p.a)}, {"b", text_or_null(p.b)}});
  json methods = json::array();
  for (const auto& m : d.methods) {
    methods.push_back({{"program", text_or_null(m.program)},
                       {"method", m.method},
                       {"change", change_name(m.change)}});
  }
  json keys_added = json::array();
  json keys_removed = json::array();
  json keys_changed = json::array();
  for (const auto& k : d.keys) {
    if (k.change == Change::added) {
      keys_added.push_back(k.key);
    } else if (k.change == Change::removed) {
      keys_removed.push_back(k.key);
    } else {
      json changes = json::array();
      for (const auto aspect : k.changes) changes.push_back(std::string(key_aspect_name(aspect)));
      keys_changed.push_back(
          {{"key", k.key}, {"changes", changes}, {"a", side(k.a)}, {"b", side(k.b)}});
    }
  }
  json differences = json::array();
  for (const auto& x : d.differences) {
    differences.push_back({{"program", text_or_null(x.program)},
                           {"method", text_or_null(x.method)},
                           {"what", std::string(difference_kind_name(x.what))},
                           {"text", x.text}});
  }
  json files = nullptr;
  if (d.files) {
    auto list = [](const std::vector<ReleaseFile>& items) {
      json out = json::array();
      for (const auto& f : items)
        out.push_back({{"file", f.file}, {"size", f.size}, {"sha256", f.sha256}});
      return out;
    };
    files = {{"added", list(d.files->added)},
             {"removed", list(d.files->removed)},
             {"unchanged", list(d.files->unchanged)},
             {"download_bytes", d.files->download_bytes}};
  }
  json j{{"format", "ptepack.diff"},
         {"version", 2},
         {"a", d.a},
         {"b", d.b},
         {"equivalent", d.equivalent()},
         {"programs", programs},
         {"methods", methods},
         {"keys_added", keys_added},
         {"keys_removed", keys_removed},
         {"keys_changed", keys_changed},
         {"state_added", d.state_added},
         {"state_removed", d.state_removed},
         {"differences", differences},
         {"differences_omitted", d.differences_omitted},
         {"notes", d.notes},
         {"files", files}};
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace ptepack
