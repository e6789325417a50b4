// pack: options checked, recorded shard options applied, the front end chosen.
#include "ptepack/pack/pack.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <exception>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/ranges.h>

#include "containers/shard_fields.h"
#include "pack/pack_internal.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"

namespace ptepack {
namespace fs = std::filesystem;

namespace {

fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  auto c = fs::weakly_canonical(p, ec);
  return ec ? p : c;
}

void check_options(const detail::PackContext& context) {
  const auto& options = context.options;
  const auto& s = options.sharding;
  if (options.output.empty()) fail(ErrorCode::usage, "no output given (-o OUTPUT)");
  if (options.output == "-") {
    fail(ErrorCode::usage,
         "-o -: pack writes files, not standard output; name a .ptn file, a .pte file or a "
         "directory");
  }
  // Options that shape a directory mean nothing for a single-file output: refused, in
  // this order, whether a command line gave them (PackOptions::given) or a caller set them.
  const OutputKind kind = context.output;
  if (kind != OutputKind::directory) {
    const ShardingOptions defaults;
    const auto given = options.given.value_or(GivenShardOptions{
        s.max_shard_bytes.has_value(), s.cap_mode != defaults.cap_mode,
        s.format != defaults.format, s.oversize_own_shard, s.alignment != defaults.alignment,
        options.shard_prefix != PackOptions{}.shard_prefix, options.placement != Placement::sets,
        s.max_shard_tensors.has_value()});
    const std::pair<bool, const char*> directory_only[] = {
        {given.max_shard_bytes || s.max_shard_bytes, "--max-shard-bytes"},
        {given.alignment, "--alignment"},
        {given.format, "--shard-format"},
        {given.prefix, "--shard-prefix"},
        {given.cap_mode, "--cap-mode"},
        {given.oversize, "--oversize"},
        {given.max_shard_tensors, "--max-shard-tensors"},
        {given.placement, "--placement"},
        {options.base.has_value(), "--base"},
        {options.merge.has_value(), "--merge"},
        {options.sign_key.has_value(), "--sign"},
        {options.release.has_value(), "--release"}};
    for (const auto& [set, name] : directory_only) {
      if (set) {
        fail(ErrorCode::usage, "{} applies to directory outputs, not to a {}", name,
             output_kind_name(kind));
      }
    }
  }
  if (auto problem = alignment_problem(s.alignment); !problem.empty())
    fail(ErrorCode::usage, "--alignment {} {}", s.alignment, problem);
  if (options.constant_alignment) {
    if (auto problem = alignment_problem(*options.constant_alignment); !problem.empty())
      fail(ErrorCode::usage, "--constant-alignment {} {}", *options.constant_alignment, problem);
  }
  if (auto problem = shard_prefix_problem(options.shard_prefix); !problem.empty())
    fail(ErrorCode::usage, "--shard-prefix {} {}", quote(options.shard_prefix), problem);
  if (options.release && (*options.release < 1 || *options.release > kMaxRelease)) {
    fail(ErrorCode::usage, "--release {}: expected 1 to 2^53-1", *options.release);
  }
  if (options.sign_key && !options.dry_run) {
    (void)SigningKey::load(*options.sign_key, options.sign_password);  // exit 2 before any work
  }
  if (options.merge) {
    const auto& name = *options.merge;
    if (name.find('/') != std::string::npos || !is_plain_file_name(name) ||
        output_kind(name) != OutputKind::program) {
      fail(ErrorCode::usage, "--merge {}: a file name ending in .pte, without '/'", quote(name));
    }
  }
  for (const auto& method : options.methods) {
    auto problem = method_name_problem(method);
    if (!problem.empty()) fail(ErrorCode::usage, "--method {}: {}", quote(method), problem);
  }
}

}  // namespace

namespace {

bool has_extension(const fs::path& path, std::string_view lower) {
  auto extension = path.extension().string();
  return std::equal(
      extension.begin(), extension.end(), lower.begin(), lower.end(),
      [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

}  // namespace

// Matched in any case: x.PTN is a package too.
OutputKind output_kind(const fs::path& output) {
  if (has_extension(output, ".ptn")) return OutputKind::package;
  if (has_extension(output, ".pte")) return OutputKind::program;
  return OutputKind::directory;
}

std::string_view output_kind_name(OutputKind kind) {
  switch (kind) {
    case OutputKind::package:
      return ".ptn package";
    case OutputKind::program:
      return ".pte program";
    case OutputKind::directory:
      break;
  }
  return "directory";
}

namespace detail {

PackContext::PackContext(const PackOptions& o, OutputKind kind)
    : options(o),
      output(kind),
      dedup(kind != OutputKind::package && o.sharding.format == ShardFormat::ptd
                ? DedupRule::bytes
                : DedupRule::dtype_shape_bytes) {}

void check_output_target(const PackContext& context, const std::vector<fs::path>& input_paths) {
  const auto& options = context.options;
  // Output and inputs as absolute, normalised paths: equal, inside (an input
  // directory) or containing (a directory output replaces its whole tree).
  auto target = canonical_or_self(fs::absolute(options.output)).lexically_normal();
  auto within = [](const fs::path& inner, const fs::path& outer) {
    auto rel = inner.lexically_relative(outer);
    return !rel.empty() && *rel.begin() != ".." && rel != ".";
  };
  for (const auto& input : input_paths) {
    auto in = canonical_or_self(fs::absolute(input)).lexically_normal();
    if (in == target || within(target, in) || within(in, target)) {
      fail(ErrorCode::usage, "{}: output would overwrite input {}", options.output.string(),
           input.string());
    }
  }
  std::error_code ec;
  auto status = fs::symlink_status(options.output, ec);
  if (!fs::exists(status)) {
    // Missing parents are made when the output is written; one that is a file cannot be.
    for (auto parent = options.output.parent_path();
         !parent.empty() && parent != parent.root_path(); parent = parent.parent_path()) {
      auto parent_status = fs::status(parent, ec);
      if (fs::exists(parent_status)) {
        if (!fs::is_directory(parent_status)) {
          fail(ErrorCode::io, "{}: {} is not a directory", options.output.string(),
               parent.string());
        }
        break;
      }
    }
    return;
  }
  const bool package = context.output != OutputKind::directory;
  if (package && !fs::is_regular_file(status)) {
    fail(ErrorCode::usage, "{}: exists and is not a regular file", options.output.string());
  }
  if (!package) {
    if (!fs::is_directory(status)) {
      fail(ErrorCode::usage, "{}: exists and is not a directory", options.output.string());
    }
    bool empty = fs::is_empty(options.output, ec);
    bool ours = fs::exists(options.output / "manifest.json", ec);
    if (!empty && !ours && !options.force) {
      fail(ErrorCode::usage,
           "{}: refusing to replace a non-empty directory that is not a ptepack output (use "
           "--force)",
           options.output.string());
    }
  }
}

void add_read_paths(const Artifact& artifact, std::vector<fs::path>& paths) {
  paths.push_back(artifact.root);
  for (const auto& d : artifact.data_files) paths.emplace_back(d);
  std::set<const InputFile*> seen;
  for (const auto& [key, t] : artifact.data) {
    if (t.bytes.file && seen.insert(t.bytes.file.get()).second)
      paths.push_back(t.bytes.file->path());
  }
  for (const auto& p : artifact.pte_programs) {
    if (seen.insert(p.program.file.get()).second) paths.push_back(p.program.file->path());
  }
}

namespace {

// What the inputs hold: every file read (programs, graphs, data files) and
// every file of a packed directory given as an input (its manifest and
// signature too), each file once; --base's files are not inputs.
uint64_t input_file_bytes(const PackOptions& options, const std::vector<fs::path>& read) {
  std::vector<fs::path> paths = read;
  for (const auto& spec : options.inputs) {
    std::error_code ec;
    if (!fs::is_directory(spec.path, ec) && spec.path.filename() != "manifest.json") continue;
    for (const auto& entry : fs::directory_iterator(directory_paths(spec.path).dir, ec)) {
      if (entry.is_regular_file(ec)) paths.push_back(entry.path());
    }
  }
  std::set<fs::path> seen;
  uint64_t total = 0;
  for (const auto& path : paths) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) continue;
    const auto size = fs::file_size(path, ec);
    if (ec) continue;
    auto canonical = fs::weakly_canonical(path, ec);
    if (!ec && seen.insert(canonical).second) total += size;
  }
  return total;
}

// A repack (docs/shard-planner.md, "A repack keeps the layout"): one packed directory alone
// into a directory of its kind, no shard option given and no --base. The output is
// planned on that directory as its own base, so it keeps its shards whole where their
// content is still needed: the same files, names and order.
std::optional<fs::path> layout_to_keep(const PackContext& context, int version,
                                       const std::vector<Artifact>& inputs) {
  const auto& options = context.options;
  if (options.base || !options.given || options.given->any() || inputs.size() != 1 ||
      !inputs.front().manifest || inputs.front().manifest->version != version ||
      context.output != OutputKind::directory) {
    return std::nullopt;
  }
  return directory_paths(options.inputs.front().path).dir;
}

}  // namespace

PackStart start_pack(const PackContext& context, int version, std::vector<fs::path>& read_paths,
                     const std::vector<Artifact>& inputs) {
  const auto& options = context.options;
  PackStart start;
  start.summary.input_bytes = input_file_bytes(options, read_paths);
  if (options.base) {
    start.base = std::make_unique<BaseRelease>(*options.base, version,
                                               options.sharding.alignment, options.jobs);
    start.base->add_read_paths(read_paths);
  } else if (auto layout = layout_to_keep(context, version, inputs)) {
    start.base = std::make_unique<BaseRelease>(*layout, version, options.sharding.alignment,
                                               options.jobs, BaseRelease::Role::layout);
  }
  if (!options.dry_run) check_output_target(context, read_paths);
  std::vector<const Manifest*> input_manifests;
  for (const auto& a : inputs) input_manifests.push_back(a.manifest ? &*a.manifest : nullptr);
  start.stamp = release_stamp(context, input_manifests);
  if (start.stamp.note) start.summary.notes.push_back(*start.stamp.note);
  auto& summary = start.summary;
  summary.output = options.output.string();
  summary.output_kind = context.output;
  summary.dry_run = options.dry_run;
  summary.sharding = options.sharding;
  return start;
}

void summarize_groups(const std::vector<StoredTensor>& tensors,
                      const std::vector<StorageGroup>& groups, PackSummary& summary,
                      Progress* progress) {
  summary.tensor_count = tensors.size();
  summary.stored_tensor_count = groups.size();
  summary.referenced_bytes = 0;
  summary.stored_bytes = 0;
  for (const auto& t : tensors) summary.referenced_bytes += t.data.bytes.size;
  for (const auto& g : groups) {
    summary.stored_bytes += g.nbytes;
    for (size_t k = 1; k < g.members.size(); ++k) {
      summary.aliases.emplace(tensors[g.members[k]].key, tensors[g.members[0]].key);
    }
  }
  if (progress != nullptr) progress->set_write_total(summary.stored_bytes);
}

}  // namespace detail

namespace {

PackSummary pack_once(const detail::PackContext& context) {
  const auto& options = context.options;
  check_options(context);
  if (options.inputs.empty()) fail(ErrorCode::usage, "no inputs given");
  if (detail::holds_pte(options.inputs.front().path) || context.output == OutputKind::program) {
    return detail::pack_pte(context);
  }
  if (options.merge || !options.methods.empty() || options.share_state ||
      options.constant_alignment) {
    fail(ErrorCode::usage, "{} applies to .pte programs; {} is a program graph input",
         options.merge                ? "--merge"
         : options.share_state        ? "--share-state"
         : options.constant_alignment ? "--constant-alignment"
                                      : "--method",
         options.inputs.front().text);
  }
  return detail::pack_graphs(context);
}

using Taken = std::optional<std::string>;

Taken take_cap(const Manifest& m, PackOptions& o) {
  if (!m.max_shard_bytes) return std::nullopt;
  o.sharding.max_shard_bytes = m.max_shard_bytes;
  return fmt::format("--max-shard-bytes {}", *m.max_shard_bytes);
}

Taken take_cap_mode(const Manifest& m, PackOptions& o) {
  if (m.cap_mode != CapMode::payload) return std::nullopt;
  o.sharding.cap_mode = CapMode::payload;
  return "--cap-mode payload";
}

Taken take_format(const Manifest& m, PackOptions& o) {
  if (m.shard_format != ShardFormat::safetensors) return std::nullopt;
  o.sharding.format = ShardFormat::safetensors;
  return "--shard-format safetensors";
}

Taken take_oversize(const Manifest& m, PackOptions& o) {
  if (!m.oversize_own_shard) return std::nullopt;
  o.sharding.oversize_own_shard = true;
  return "--oversize own-shard";
}

// After the format (the table's order): only a .ptd directory records its alignment.
Taken take_alignment(const Manifest& m, PackOptions& o) {
  if (!m.alignment || o.sharding.format != ShardFormat::ptd) return std::nullopt;
  o.sharding.alignment = *m.alignment;
  return fmt::format("--alignment {}", *m.alignment);
}

Taken take_prefix(const Manifest& m, PackOptions& o) {
  if (!m.shard_prefix) return std::nullopt;
  o.shard_prefix = *m.shard_prefix;
  return fmt::format("--shard-prefix {}", *m.shard_prefix);
}

Taken take_placement(const Manifest& m, PackOptions& o) {
  if (!m.placement_single) return std::nullopt;
  o.placement = Placement::single;
  return "--placement single";
}

Taken take_max_tensors(const Manifest& m, PackOptions& o) {
  if (!m.max_shard_tensors) return std::nullopt;
  o.sharding.max_shard_tensors = *m.max_shard_tensors;
  return fmt::format("--max-shard-tensors {}", *m.max_shard_tensors);
}

// Pack's part of each shard option, in the order a note names them; the flag and the words
// it takes come from the manifest's row of the option (shard_fields(), by its field).
struct PackShardOption {
  std::string_view field;
  bool GivenShardOptions::*given;
  Taken (*take)(const Manifest& m, PackOptions& o);
};

constexpr std::array<PackShardOption, 8> kPackShardOptions{{
    {"max_shard_bytes", &GivenShardOptions::max_shard_bytes, take_cap},
    {"cap_mode", &GivenShardOptions::cap_mode, take_cap_mode},
    {"shard_format", &GivenShardOptions::format, take_format},
    {"oversize", &GivenShardOptions::oversize, take_oversize},
    {"alignment", &GivenShardOptions::alignment, take_alignment},
    {"shard_prefix", &GivenShardOptions::prefix, take_prefix},
    {"placement", &GivenShardOptions::placement, take_placement},
    {"max_shard_tensors", &GivenShardOptions::max_shard_tensors, take_max_tensors},
}};

std::vector<ShardOption> joined_shard_options() {
  std::vector<ShardOption> rows;
  const auto fields = shard_fields();
  for (const auto& own : kPackShardOptions) {
    const auto field = std::find_if(fields.begin(), fields.end(),
                                    [&](const ShardField& f) { return f.field == own.field; });
    if (field == fields.end())
      fail(ErrorCode::internal, "shard option {}: no manifest field", own.field);
    rows.push_back({field->flag, field->words, own.given, own.take});
  }
  return rows;
}

}  // namespace

std::span<const ShardOption> shard_options() {
  static const std::vector<ShardOption> rows = joined_shard_options();
  return rows;
}

bool GivenShardOptions::any() const {
  const auto options = shard_options();
  return std::any_of(options.begin(), options.end(),
                     [this](const ShardOption& option) { return this->*option.given; });
}

namespace {

// A directory output from one packed directory alone: every shard option not
// given is taken from its manifest. Returns the note naming what was taken
// (only values other than the defaults), or nothing when none was.
std::optional<std::string> apply_recorded_options(PackOptions& options, OutputKind kind) {
  if (!options.given || options.inputs.size() != 1 || kind != OutputKind::directory)
    return std::nullopt;
  const auto& spec = options.inputs.front();
  std::error_code ec;
  auto path = spec.path;
  if (fs::is_directory(path, ec)) path /= "manifest.json";
  if (!spec.data.empty() || path.filename() != "manifest.json" || !fs::is_regular_file(path, ec))
    return std::nullopt;
  Manifest m;
  try {
    m = read_manifest_file(*InputFile::open(path), path.string());
  } catch (const Error&) {
    return std::nullopt;  // not a manifest: the front end that reads it says why
  }
  std::vector<std::string> taken;
  for (const auto& option : shard_options()) {
    if (!((*options.given).*option.given)) {
      if (auto typed = option.take(m, options)) taken.push_back(std::move(*typed));
    }
  }
  if (taken.empty()) return std::nullopt;
  return fmt::format("shard options recorded in {}: {} (an option given overrides its value; "
                     "--max-shard-bytes none drops a cap)",
                     path.string(), fmt::join(taken, " "));
}

}  // namespace

PackSummary pack(const PackOptions& given_options) {
  auto start = std::chrono::steady_clock::now();
  PackOptions options = given_options;
  const OutputKind kind = output_kind(options.output);  // the one time it is asked
  const auto recorded = apply_recorded_options(options, kind);
  const detail::PackContext context(options, kind);
  // Where the output goes is checked first: its errors owe nothing to recorded options, so
  // they carry no note about them.
  if (recorded && !options.dry_run) {
    detail::check_output_target(context, {options.inputs.front().path});
  }
  PackSummary summary;
  try {
    summary = pack_once(context);
  } catch (const Error& e) {
    // A cap or option refused because of values the user did not type says where they came
    // from; damage to the input (verify's lines) is reported as verify reports it.
    const bool from_options = e.code() == ErrorCode::usage || e.code() == ErrorCode::conflict;
    if (!recorded || !from_options) throw;
    fail(e.code(), "{} (with the {})", e.what(), *recorded);
  }
  if (recorded) summary.notes.insert(summary.notes.begin(), *recorded);
  summary.elapsed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace ptepack
