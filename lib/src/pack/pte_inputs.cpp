// The .pte front end's inputs: read, checked and turned into program sources.
#include "pack/pte_inputs.h"

#include <algorithm>
#include <map>

#include "ptepack/base/error.h"
#include "ptepack/pte/pte.h"

namespace ptepack::detail {

namespace fs = std::filesystem;

namespace {

void check_method_name(const std::string& name, const std::string& text) {
  auto problem = method_name_problem(name);
  if (!problem.empty()) fail(ErrorCode::usage, "{}: {}", text, problem);
}

}  // namespace

bool merging(const PackContext& context, size_t programs,
             const std::vector<std::optional<std::string>>& renames) {
  const auto& options = context.options;
  if (options.merge || !options.methods.empty()) return true;
  if (context.output == OutputKind::program && programs > 1) return true;
  return std::any_of(renames.begin(), renames.end(), [](const auto& r) { return r.has_value(); });
}

void load_inputs(const PackContext& context, PteInputs& in) {
  const auto& options = context.options;
  in.directories.reserve(options.inputs.size(), options.jobs);
  std::vector<std::optional<std::string>> renames;
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    const auto& spec = options.inputs[i];
    const auto& text = spec.text;
    if (spec.method) check_method_name(*spec.method, text);
    auto artifact = in.directories.read(i, spec, ProgramForm::buffer);
    if (artifact.pte_programs.empty()) {
      fail(ErrorCode::usage, "{}: a {} cannot be packed together with .pte programs", artifact.name,
           artifact_kind_name(artifact.kind));
    }
    if (spec.method && artifact.pte_programs.size() != 1) {
      fail(ErrorCode::usage, "{}: METHOD= renames the method of one program; this input holds {}",
           text, artifact.pte_programs.size());
    }
    add_read_paths(artifact, in.paths);
    in.artifacts.push_back(std::move(artifact));
    renames.push_back(spec.method);
  }
  for (size_t a = 0; a < in.artifacts.size(); ++a) {
    for (size_t k = 0; k < in.artifacts[a].pte_programs.size(); ++k) {
      in.renames.push_back(renames[a]);
    }
  }
  in.merge = merging(context, in.renames.size(), in.renames);
  const bool merge = in.merge;
  if (options.share_state && !merge) {
    fail(ErrorCode::usage,
         "{}: --share-state shares mutable buffers between the methods of a merge (-o NAME.pte "
         "with two or more programs, or --merge NAME.pte)",
         options.output.string());
  }
  if (merge && !options.merge && context.output == OutputKind::directory && in.renames.size() > 1) {
    fail(ErrorCode::usage,
         "{}: renaming or choosing methods of several programs makes them one program: name it "
         "with --merge NAME.pte (or write -o NAME.pte)",
         options.output.string());
  }
  std::map<std::string, std::string> names;  // file name -> the input that has it
  for (const auto& a : in.artifacts) {
    for (const auto& p : a.pte_programs) {
      std::string display =
          a.kind == ArtifactKind::pte_directory ? (a.root / p.file).string() : a.name;
      if (merge) {  // names name no output: the merged program has its own
        in.sources.push_back({display, &p, &a.data});
        continue;
      }
      if (p.file == "manifest.json" || p.file.ends_with(".ptd") || !is_plain_file_name(p.file)) {
        fail(ErrorCode::usage,
             "{}: a program keeps its file name in the output directory, and {} is reserved "
             "there (manifest.json, .ptd shards); rename the file",
             display, quote(p.file));
      }
      if (auto [first, fresh] = names.emplace(p.file, display); !fresh) {
        fail(ErrorCode::usage,
             "{}: {} is a program named {} too, and each keeps its file name in the output "
             "directory: give one another name (ln -s {} OTHER.pte, then pack OTHER.pte), or "
             "make them one program with --merge NAME.pte",
             display, first->second, quote(p.file), display);
      }
      in.sources.push_back({display, &p, &a.data});
    }
  }
}

void add_proven_digests(const PteInputs& in, RangeDigests& digests) {
  for (const auto& a : in.artifacts) {
    for (const auto& [key, t] : a.data) {
      if (t.expected_sha256) digests.set(t.bytes, *t.expected_sha256);
    }
  }
}

namespace {

// The merged program's file name: -o NAME.pte, --merge NAME.pte, or the one input's.
std::string merged_file_name(const PackContext& context, const PteInputs& in) {
  const auto& options = context.options;
  if (context.output == OutputKind::program) return options.output.filename().string();
  if (options.merge) return *options.merge;
  return in.sources.front().file->file;
}

}  // namespace

std::unique_ptr<PteMerge> merge_pte_sources(const PackContext& context, const PteInputs& in,
                                            const RangeDigests& digests) {
  const auto& options = context.options;
  std::vector<pte::MergeInput> inputs;
  std::vector<std::string> names;
  for (const auto& s : in.sources) {
    auto stem = fs::path(s.file->file).stem().string();
    inputs.push_back({s.name, stem, &s.file->program, s.data, &s.file->named_keys, {}, {}});
    names.push_back(s.name);
  }
  pte::choose_methods(inputs, in.renames, options.methods);
  const std::string file = merged_file_name(context, in);
  auto merged = std::make_unique<PteMerge>();
  merged->merged = pte::merge(inputs, digests, file,
                              {options.share_state, options.constant_alignment.value_or(0)});
  merged->file = ProgramFile{file, pte::read(merged->merged.file), std::nullopt};
  merged->source = {fmt::format("{}", fmt::join(names, " + ")), &merged->file,
                    &merged->merged.data};
  return merged;
}

bool holds_pte(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;  // the program-graph front end's reader says so
  const auto kind = identify(path);
  return kind == ArtifactKind::pte || kind == ArtifactKind::pte_directory;
}

}  // namespace ptepack::detail
