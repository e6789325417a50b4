// Text and JSON summaries of a pack run (or of its plan, with --dry-run).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/text_wrap.h"
#include "json/json_util.h"

#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "ptepack/pack/pack.h"

namespace ptepack {

namespace {

// A few lines whatever the model's size: long lists (renames, state keys, shards) are
// counted, and listed only when short or with -v.
constexpr size_t kListed = 8;

// The text being written, each line wrapped to `width`.
struct PackText {
  std::string out;
  size_t width;
  bool verbose;

  void line(const std::string& text) {
    auto escaped_line = text_line(text);
    const size_t blank = std::min(escaped_line.find_first_not_of('\n'), escaped_line.size() - 1);
    out.append(escaped_line, 0, blank);
    escaped_line.pop_back();
    out += detail::wrap_line(std::string_view(escaped_line).substr(blank), width);
  }
  // The count of a list's entries left out.
  void more(size_t total) {
    if (!verbose && total > kListed)
      line(fmt::format("  ... {} more (-v lists all)", total - kListed));
  }
};

// What was written, its methods and, for programs, what each loads.
void methods_text(PackText& t, const PackSummary& s) {
  const bool program_file = s.output_kind == OutputKind::program;
  t.line(fmt::format(
      "{} {} ({})", s.dry_run ? "plan for" : "packed", s.output,
      s.output_kind == OutputKind::package ? "ptn package"
      : program_file                       ? "pte program, every byte inside"
                     : fmt::format("directory, {} shards", shard_format_name(s.sharding.format))));
  t.line(fmt::format("methods: {}", s.methods.size()));
  for (const auto& m : s.methods) {
    t.line(fmt::format("  {:<20} from {}{}", m.name, m.input,
                       m.source == m.name ? "" : fmt::format(" ({})", m.source)));
  }
  if (!s.programs.empty()) t.line(fmt::format("programs: {}", s.programs.size()));
  for (const auto& p : s.programs) {
    std::string needs = program_file       ? std::string("loads without data files")
                        : p.shards.empty() ? fmt::format("needs {} data file{}", p.shard_count,
                                                         p.shard_count == 1 ? "" : "s")
                                           : fmt::format("needs {}", fmt::join(p.shards, " "));
    t.line(fmt::format("  {:<28} {:>12} bytes  {}", p.file, p.size, needs));
  }
}

void shards_text(PackText& t, const PackSummary& s) {
  const auto& cap = s.sharding.max_shard_bytes;
  t.line(fmt::format("shards: {}, cap {}", s.shards.size(),
                     cap ? fmt::format("{} ({} mode)", *cap, cap_mode_name(s.sharding.cap_mode))
                         : std::string("none")));
  for (size_t i = 0; i < s.shards.size() && (t.verbose || i < kListed); ++i) {
    const auto& sh = s.shards[i];
    uint64_t measured = cap_measure(s.sharding.cap_mode, sh.size, sh.payload_bytes);
    t.line(fmt::format(
        "  #{:<3} {:<40} {:>12} bytes  payload {:>12}  {} keys{}{}", i + 1,
        sh.file.empty() ? std::string("(named from content when written)") : sh.file, sh.size,
        sh.payload_bytes, sh.keys.size(), cap ? "  fill " + percent(measured, *cap) : std::string(),
        !sh.reused           ? std::string()
        : sh.stale_bytes > 0 ? fmt::format("  reused, {} stale", human_bytes(sh.stale_bytes))
                             : std::string("  reused")));
  }
  t.more(s.shards.size());
}

// --base: what the release reuses of its base and what a client downloads.
void base_text(PackText& t, const BaseSummary& b) {
  t.line(fmt::format("base {}: {} shards reused, {} new, {} stale carried", b.path, b.shards_reused,
                     b.shards_new, human_bytes(b.stale_bytes)));
  if (b.download_bytes) {
    t.line(fmt::format(
        "  download from the base: {} of {} ({} changed{})", human_bytes(*b.download_bytes),
        human_bytes(b.release_bytes), human_bytes(b.changed_bytes),
        b.changed_bytes > 0 ? fmt::format(", {:.2f}x", static_cast<double>(*b.download_bytes) /
                                                           static_cast<double>(b.changed_bytes))
                            : std::string()));
  }
  if (b.stored_again_keys > 0) {
    t.line(fmt::format("  {} keys stored again beside a copy a reused shard keeps ({})",
                       b.stored_again_keys, human_bytes(b.stored_again_bytes)));
  }
}

}  // namespace

std::string render_pack_text(const PackSummary& s, bool verbose, size_t width) {
  PackText t{{}, width, verbose};
  methods_text(t, s);
  t.line(fmt::format("renamed keys: {}{}", s.renamed_keys,
                     !verbose && s.renamed_keys > 0 ? " (-v lists them)" : ""));
  if (verbose) {
    for (const auto& r : s.renames) t.line(fmt::format("  {}: {} -> {}", r.method, r.from, r.to));
  }
  t.line(fmt::format("state keys: {}", s.state.size()));
  size_t listed = 0;
  for (const auto& k : s.state) {
    if (!verbose && listed++ == kListed) break;
    t.line(fmt::format("  {}", k));
  }
  t.more(s.state.size());
  t.line(fmt::format("tensors: {} keys, {} stored, {} aliases", s.tensor_count, s.stored_tensor_count,
                     s.aliases.size()));
  t.line(fmt::format("bytes: {} referenced, {} stored, {} saved by dedup",
                     human_bytes(s.referenced_bytes), human_bytes(s.stored_bytes),
                     human_bytes(s.referenced_bytes - s.stored_bytes)));
  if (s.dropped_keys > 0) {
    t.line(fmt::format("dropped: {} unreferenced keys, {}", s.dropped_keys,
                       human_bytes(s.dropped_bytes)));
  }
  if (s.output_kind == OutputKind::directory) shards_text(t, s);
  if (s.base) base_text(t, *s.base);
  t.line(s.dry_run
             ? fmt::format("would write: {} bytes{}", s.output_bytes,
                           s.output_kind != OutputKind::directory ? "" : " and manifest.json")
             : fmt::format("wrote: {} bytes in {:.2f} s ({} read at {}/s)", s.output_bytes,
                           s.elapsed_seconds, human_bytes(s.referenced_bytes),
                           human_bytes(static_cast<uint64_t>(static_cast<double>(s.referenced_bytes) /
                                                             std::max(s.elapsed_seconds, 1e-3)))));
  for (const auto& note : s.notes) t.line("note: " + note);
  return std::move(t.out);
}

std::string render_pack_json(const PackSummary& s) {
  using ordered = nlohmann::json;
  ordered j;
  j["format"] = "ptepack.pack";
  j["version"] = 1;
  j["output"] = s.output;
  j["kind"] = artifact_kind_name(s.output_kind == OutputKind::package   ? ArtifactKind::package
                                 : s.output_kind == OutputKind::program ? ArtifactKind::pte
                                 : s.programs.empty()                   ? ArtifactKind::graph_directory
                                                                        : ArtifactKind::pte_directory);
  j["dry_run"] = s.dry_run;
  ordered methods = ordered::array();
  for (const auto& m : s.methods)
    methods.push_back({{"name", m.name}, {"input", m.input}, {"source_method", m.source}});
  j["methods"] = methods;
  ordered renames = ordered::array();
  for (const auto& r : s.renames)
    renames.push_back({{"method", r.method}, {"from", r.from}, {"to", r.to}});
  j["renames"] = renames;
  j["state"] = s.state;
  j["aliases"] = s.aliases;
  j["tensor_count"] = s.tensor_count;
  j["stored_tensor_count"] = s.stored_tensor_count;
  j["referenced_bytes"] = s.referenced_bytes;
  j["stored_bytes"] = s.stored_bytes;
  j["dedup_saved_bytes"] = s.referenced_bytes - s.stored_bytes;
  j["dropped_keys"] = s.dropped_keys;
  j["dropped_bytes"] = s.dropped_bytes;
  if (s.output_kind == OutputKind::directory) {  // a single file has no shards
    j["shard_format"] = shard_format_name(s.sharding.format);
    j["max_shard_bytes"] =
        s.sharding.max_shard_bytes ? ordered(*s.sharding.max_shard_bytes) : ordered(nullptr);
    j["cap_mode"] = cap_mode_name(s.sharding.cap_mode);
    ordered shards = ordered::array();
    for (const auto& sh : s.shards) {
      shards.push_back({{"file", sh.file.empty() ? ordered(nullptr) : ordered(sh.file)},
                        {"size", sh.size},
                        {"payload_bytes", sh.payload_bytes},
                        {"keys", sh.keys}});
      if (s.base) {  // only with --base, so other outputs keep their form
        shards.back()["reused"] = sh.reused;
        shards.back()["stale_bytes"] = sh.stale_bytes;
      }
    }
    j["shards"] = shards;
  }
  if (s.base) {
    const auto& b = *s.base;
    j["base"] = {
        {"path", b.path},
        {"fresh_reason", b.fresh_reason ? ordered(*b.fresh_reason) : ordered(nullptr)},
        {"shards_reused", b.shards_reused},
        {"shards_new", b.shards_new},
        {"stale_bytes", b.stale_bytes},
        {"stored_again_keys", b.stored_again_keys},
        {"stored_again_bytes", b.stored_again_bytes},
        {"changed_bytes", b.changed_bytes},
        {"download_bytes", b.download_bytes ? ordered(*b.download_bytes) : ordered(nullptr)},
        {"release_bytes", b.release_bytes},
    };
  }
  if (!s.programs.empty()) {
    ordered programs = ordered::array();
    for (const auto& p : s.programs) {
      programs.push_back({{"file", p.file},
                          {"input", p.input},
                          {"methods", p.methods},
                          {"size", p.size},
                          {"shards", p.shards}});
    }
    j["programs"] = programs;
    j["notes"] = s.notes;
  }
  j["output_bytes"] = s.output_bytes;
  j["input_bytes"] = s.input_bytes;
  return json_text(j);
}

}  // namespace ptepack
