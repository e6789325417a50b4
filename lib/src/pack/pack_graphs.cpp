// The program-graph front end's pack: load, merge, hash, plan, then write
// atomically (or only print the plan).
#include "pack/base_release.h"
#include "pack/pack_internal.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "ptepack/base/memory_return.h"
#include "base/ordered_cursor.h"
#include "base/parallel.h"
#include "hash/parallel_hash.h"
#include "ptepack/pack/pack.h"

namespace ptepack::detail {
namespace fs = std::filesystem;
namespace {

// The program-graph inputs, read and checked on `-j` threads, each alone (most
// of a many-tensor pack is parsing its programs); parallel_for raises the error
// of the first failing input in command-line order, as when they are loaded one
// after another.
std::vector<Artifact> load_graph_inputs(const PackContext& context, DirectoryInputs& directories) {
  const auto& options = context.options;
  std::vector<Artifact> loaded(options.inputs.size());
  directories.reserve(options.inputs.size(), options.jobs);
  parallel_for(options.inputs.size(), effective_jobs(options.jobs), [&](size_t i) {
    const auto& spec = options.inputs[i];
    loaded[i] = directories.read(i, spec, ProgramForm::tree);  // merge renames in the tree
    const auto& artifact = loaded[i];
    if (!artifact.pte_programs.empty()) {
      fail(ErrorCode::usage, "{}: .pte programs cannot be packed together with program graphs",
           artifact.name);
    }
    if (!artifact.program_tree) {
      fail(ErrorCode::usage, "{}: a {} holds no program; pass it as @DATA of a program input",
           artifact.name, artifact_kind_name(artifact.kind));
    }
  });
  return loaded;
}

// The merge, its figures in the summary, and the merged program encoded.
void merge_graphs(std::vector<MergeInput> merge_inputs, uint64_t program_file_bytes,
                  const PackContext& context, PreparedPack& prepared, PackSummary& summary) {
  const auto& options = context.options;
  for (const auto& in : merge_inputs) {
    for (const auto& m : in.program->methods) {
      summary.methods.push_back({in.rename_method ? *in.rename_method : m->name, in.name, m->name});
    }
  }
  prepared.merged =
      merge_programs(std::move(merge_inputs), effective_jobs(options.jobs), options.list_renames);
  auto& merged = prepared.merged;
  summary.renames = std::move(merged.renames);
  summary.renamed_keys = merged.renamed_keys;
  summary.state.assign(merged.state.begin(), merged.state.end());
  summary.dropped_keys = merged.dropped_keys;
  summary.dropped_bytes = merged.dropped_bytes;
  {
    // From here to the encoded program, far more is freed than allocated: the
    // merged table as its entries move into one list, then the program as it
    // is encoded into fresh pages. Freed pages go back at once.
    PromptMemoryReturn prompt;
    // Tensors and state keys are both ordered by key: one walk marks the state.
    prepared.tensors.reserve(merged.tensors.size());
    OrderedCursor state(merged.state);
    while (!merged.tensors.empty()) {
      auto entry = merged.tensors.extract(merged.tensors.begin());
      const bool is_state = state.contains(entry.key());
      prepared.tensors.push_back({std::move(entry.key()), std::move(entry.mapped()), {}, is_state});
    }
    // Only the program's bytes are needed from here on.
    prepared.program = write_program_buffer(std::move(merged.program), program_file_bytes);
  }
  check_readable_size(fmt::format("{}: the merged program", options.output.string()),
                              prepared.program.size(), Limits::max_program_bytes);
}

// The output's writing: the hashing pass, and the output written after it or,
// for a large output, while it runs.
class GraphWriter {
 public:
  GraphWriter(PreparedPack& prepared, const PackContext& context, DirectoryInputs& directories,
              PackSummary& summary)
      : prepared_(prepared),
        context_(context),
        options_(context.options),
        directories_(directories),
        summary_(summary) {}

  void run() {
    progress_.set_hash_total(plan_hashing());
    if (!options_.dry_run) progress_.expect_writes();
    progress_.start(options_.progress);
    const bool speculated = try_write_while_hashing();
    if (!speculated) {
      hash();
      if (!options_.dry_run && !output_) output_ = make_output();
    }
    if (!confirmed_) {
      if (speculated) {  // the prediction failed: a fresh output
        output_.reset();
        output_ = make_output();
        progress_.restart_writes();
      }
      if (summary_.output_kind == OutputKind::package) {
        write_package(prepared_, output_.get(), &progress_, summary_);
      } else {
        write_directory(prepared_, context_, output_.get(), &progress_, summary_);
      }
    }
    progress_.stop();
    if (output_) output_->commit();
  }

 private:
  // A tensor of a packed directory has the digest its manifest records, proven
  // when that directory's bytes are checked; every other tensor is hashed.
  // Returns the bytes the pass reads.
  uint64_t plan_hashing() {
    uint64_t total = directories_.hash_total();
    for (size_t i = 0; i < prepared_.tensors.size(); ++i) {
      const auto& t = prepared_.tensors[i];
      if (t.data.expected_sha256) continue;
      ranges_.push_back(t.data.bytes);
      hashed_.push_back(i);
      total += t.data.bytes.size;
    }
    return total;
  }

  void hash() {
    directories_.check_bytes(&progress_);
    auto digests = hash_ranges(ranges_, options_.jobs, &progress_);
    for (auto& t : prepared_.tensors) {
      if (t.data.expected_sha256) t.sha256 = *t.data.expected_sha256;
    }
    for (size_t i = 0; i < digests.size(); ++i) prepared_.tensors[hashed_[i]].sha256 = digests[i];
  }

  [[nodiscard]] AtomicOutput::Kind output_kind_of() const {
    return summary_.output_kind == OutputKind::package ? AtomicOutput::Kind::file
                                                       : AtomicOutput::Kind::directory;
  }
  [[nodiscard]] std::unique_ptr<AtomicOutput> make_output() const {
    return std::make_unique<AtomicOutput>(options_.output, output_kind_of());
  }

  // A large output is written while it is hashed, on the dedup groups
  // predicted from samples; the digests then confirm them or it is written
  // again (the bytes are the same either way). Not at -j1, not where the
  // output would need new directories, and not when it cannot be created:
  // an input's error then still comes first, as when hashing comes first.
  // Returns whether it was tried (hash() then ran).
  bool try_write_while_hashing() {
    if (options_.dry_run || effective_jobs(options_.jobs) <= 1 || prepared_.base ||
        !worth_writing_while_hashing(prepared_.tensors, options_.write_while_hashing_from))
      return false;
    output_ = output_before_hashing(context_, output_kind_of());
    if (!output_) return false;
    auto hash = [this] { this->hash(); };
    if (summary_.output_kind == OutputKind::package) {
      auto speculation =
          write_package_while_hashing(prepared_, *output_, &progress_, summary_, hash);
      if (!speculation) return false;
      confirmed_ = confirm_package(prepared_, *speculation, &progress_, summary_);
      return true;
    }
    auto speculation =
        write_directory_while_hashing(prepared_, context_, *output_, &progress_, hash);
    if (!speculation) return false;
    confirmed_ =
        confirm_directory(prepared_, *speculation, context_, *output_, &progress_, summary_);
    return true;
  }

  PreparedPack& prepared_;
  const PackContext& context_;
  const PackOptions& options_;
  DirectoryInputs& directories_;
  PackSummary& summary_;
  Progress progress_;
  std::vector<ByteRange> ranges_;
  std::vector<size_t> hashed_;  // index into prepared.tensors of each range
  std::unique_ptr<AtomicOutput> output_;
  bool confirmed_ = false;
};

}  // namespace

PackSummary pack_graphs(const PackContext& context) {
  DirectoryInputs directories;
  auto loaded = load_graph_inputs(context, directories);
  std::vector<MergeInput> merge_inputs;
  std::vector<fs::path> input_paths;
  uint64_t program_file_bytes = 0;  // about the merged program's size
  for (size_t i = 0; i < loaded.size(); ++i) {
    auto& artifact = loaded[i];
    add_read_paths(artifact, input_paths);
    program_file_bytes += artifact.program_file_bytes;
    merge_inputs.push_back(MergeInput{artifact.name, std::move(artifact.program_tree),
                                      std::move(artifact.data), context.options.inputs[i].method});
  }
  auto start = start_pack(context, kManifestVersion, input_paths, loaded);
  PreparedPack prepared;
  prepared.dedup = context.dedup;
  prepared.base = std::move(start.base);
  prepared.stamp = start.stamp;
  PackSummary summary = std::move(start.summary);
  merge_graphs(std::move(merge_inputs), program_file_bytes, context, prepared, summary);
  GraphWriter(prepared, context, directories, summary).run();
  return summary;
}

}  // namespace ptepack::detail
