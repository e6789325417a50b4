// pack for .pte programs: weights out into shared shards (-o DIR) or back in (-o NAME.pte).
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "base/parallel.h"
#include "pack/base_release.h"
#include "pack/pack_internal.h"
#include "pack/pte_inputs.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "pte/dump_pte.h"
#include "pte/externalize.h"
#include "pte/merge.h"

namespace ptepack::detail {
namespace {

namespace fs = std::filesystem;

// A range of a composed file (a merged program) as the range of the input it
// was composed from, when it lies inside one: read from there, and two merges
// of the same inputs give contents that same_bytes finds equal.
ByteRange resolved(const ByteRange& range) {
  ByteRange source;
  return range.file->source_of(range.offset, range.size, source) ? source : range;
}

FileContent program_content(const pte::Layout& layout) {
  FileContent content;
  content.size = layout.file_size;
  content.pieces.push_back({0, layout.head, {}});
  for (const auto& [offset, range] : layout.pieces)
    content.pieces.push_back({offset, {}, resolved(range)});
  return content;
}

ProgramSource the_one_source(const PackContext& context, const PteInputs& in) {
  if (in.sources.size() != 1) {
    fail(ErrorCode::usage, "{}: a .pte output holds one program; the inputs hold {}",
         context.options.output.string(), in.sources.size());
  }
  return in.sources.front();
}

ProgramSummary program_summary(const ProgramSource& s, uint64_t size) {
  return {s.file->file, s.name, s.file->program.plans, {}, 0, size};
}

// A .pte output: its one program with every byte put back in.
struct InlinedProgram {
  pte::Rewrite rewrite;
  FileContent content;
  InputFilePtr file;  // the same bytes, readable: the summary is counted from them
};

InlinedProgram inline_content(const PackContext& context, const ProgramSource& source,
                              const RangeDigests& digests) {
  const auto& options = context.options;
  InlinedProgram out;
  out.rewrite = inline_program(source, digests);
  out.rewrite.alignment = options.sharding.alignment;
  out.rewrite.constant_alignment = options.constant_alignment.value_or(0);
  auto layout = pte::rewrite(source.file->program, out.rewrite);
  out.content = program_content(layout);
  out.file = InputFile::compose(options.output.string(),
                                {std::move(layout.head), std::move(layout.pieces),
                                 layout.file_size});
  return out;
}

// Counted from the program as written, read back by the reader and counted by the code
// dump counts a .pte with (own_tensors, stored_ranges): the two always agree.
void summarize_inlined(const PackContext& context, const ProgramSource& source,
                       const InlinedProgram& inlined, PackSummary& summary) {
  summary.programs.push_back(program_summary(source, inlined.content.size));
  summary.programs.back().file = context.options.output.filename().string();
  summary.output_bytes = inlined.content.size;
  const auto own = own_tensors(pte::read(inlined.file));
  std::vector<ByteRange> ranges;
  for (const auto& [key, t] : own) {
    summary.referenced_bytes += t.bytes.size;
    ranges.push_back(t.bytes);
  }
  const auto stored = stored_ranges(std::move(ranges));
  summary.tensor_count = own.size();
  summary.stored_tensor_count = stored.count;
  summary.stored_bytes = stored.bytes;
}

// The .pte output's bytes, synced: nothing names it by digest, so it is not hashed.
void write_program_file(const FileContent& content, AtomicOutput& output, Progress& progress,
                        const std::stop_token& stop = {}) {
  OutputFile file = output.file();
  StreamOptions stream;
  stream.stop = stop;
  write_content(file, content, stream, &progress);
  file.finish(content.size, OutputFile::Durability::now);
}

// Who reads each tensor: the programs whose key lists name it (both sorted by
// key); placed by sharing set for two or more programs unless --placement single.
ProgramUse program_use(const std::vector<StoredTensor>& tensors, const ExternalizedSet& set,
                       const PackContext& context) {
  ProgramUse use;
  use.programs = set.programs.size();
  use.by_sharing_set = use.programs >= 2 && context.options.placement != Placement::single;
  use.users.resize(tensors.size());
  for (uint32_t p = 0; p < set.programs.size(); ++p) {
    auto t = tensors.begin();
    for (const auto& key : set.programs[p].keys) {
      t = std::lower_bound(t, tensors.end(), key,
                           [](const StoredTensor& x, const std::string& k) { return x.key < k; });
      if (t != tensors.end() && t->key == key)
        use.users[static_cast<size_t>(t - tensors.begin())].push_back(p);
    }
  }
  return use;
}

// The inputs' chosen methods made one program, read back as the one source.
void merge_sources(const PackContext& context, PteInputs& in, RangeDigests& digests,
                   Progress& progress, PackSummary& summary) {
  in.merged = merge_pte_sources(context, in, digests);
  const auto& merged = in.merged->merged;
  for (const auto& m : merged.methods)
    summary.methods.push_back({m.name, in.sources[m.input].name, m.source});
  summary.notes.insert(summary.notes.end(), merged.notes.begin(), merged.notes.end());
  if (merged.named_data_shared + merged.delegate_blobs_shared > 0) {
    summary.notes.push_back(fmt::format(
        "merge: {} named-data entries and {} delegate blobs stored once for several inputs",
        merged.named_data_shared, merged.delegate_blobs_shared));
  }
  in.sources = {in.merged->source};
  add_program_ranges(in.sources.front(), digests);  // known through the inputs' digests
  digests.compute(context.options.jobs, &progress);
}

// A directory of programs, planned: the keys moved out, the shards placed, the
// programs rewritten to name them.
struct PlannedPrograms {
  ExternalizedSet set;
  DirectoryPlan plan;
  std::vector<FileContent> programs;
};

// The programs read, each method's origin and the notes in the summary, the
// merge made when asked for.
void prepare_sources(const PackContext& context, PteInputs& in, RangeDigests& digests,
                     Progress& progress, PackSummary& summary) {
  digests.compute(context.options.jobs, &progress);
  for (const auto& s : in.sources) {
    if (const size_t n = unreadable_named_data(s)) {
      summary.notes.push_back(fmt::format(
          "{}: {} named-data keys dropped: only delegates read named data, and it has none", s.name,
          n));
    }
  }
  if (in.merge) {
    merge_sources(context, in, digests, progress, summary);
  } else {
    for (const auto& s : in.sources) {
      for (const auto& plan : s.file->program.plans)
        summary.methods.push_back({plan, s.name, plan});
    }
  }
}

// Keys moved out, grouped, and the directory planned: the base's shards kept,
// the rest placed and laid out.
PlannedPrograms plan_pte_directory(const PackContext& context, PteInputs& in, RangeDigests& digests,
                                   Progress& progress, PackSummary& summary) {
  const auto& options = context.options;
  PlannedPrograms planned;
  auto& base = in.base;
  PreviousKeys previous;
  if (base) previous = base->previous_keys();
  planned.set = externalize(in.sources, digests, base ? &previous : nullptr);
  for (const auto& p : planned.set.programs) {
    summary.renamed_keys += p.renames.size();
    if (options.list_renames)
      summary.renames.insert(summary.renames.end(), p.renames.begin(), p.renames.end());
  }
  const auto& tensors = planned.set.tensors;
  auto groups = group_tensors(tensors, context.dedup);
  summarize_groups(tensors, groups, summary, &progress);
  if (base) base->plan(tensors, options, summary);
  planned.plan = plan_for_output(tensors, groups, program_use(tensors, planned.set, context),
                                 context, base.get());
  return planned;
}

// Each program rewritten to load its keys from the shards.
void rewrite_programs(const PackContext& context, const PteInputs& in, PlannedPrograms& planned,
                      PackSummary& summary) {
  const auto& options = context.options;
  for (size_t p = 0; p < in.sources.size(); ++p) {
    auto& rewrite = planned.set.programs[p].rewrite;
    rewrite.alignment = options.sharding.alignment;
    rewrite.constant_alignment = options.constant_alignment.value_or(0);
    planned.programs.push_back(program_content(pte::rewrite(in.sources[p].file->program, rewrite)));
    summary.programs.push_back(program_summary(in.sources[p], planned.programs.back().size));
    summary.output_bytes += planned.programs.back().size;
    if (const size_t needs = planned.plan.program_shards[p].size(); needs > 1) {
      summary.notes.push_back(fmt::format(
          "{} needs {} data files: C++ Module(program, {{files...}}) on ExecuTorch 1.1+ loads "
          "them; ExecuTorch 1.0 and the Python bindings take one (pack with --placement "
          "single and without --max-shard-bytes for one)",
          in.sources[p].file->file, needs));
    }
  }
}

// What a directory of programs' writer wrote under temporary names: the
// programs (under their own names) and the new shards.
struct WrittenPrograms {
  std::vector<Digest> programs;
  std::vector<Digest> shards;
};

WrittenPrograms write_program_files(const PackContext& context, const PteInputs& in,
                                    const PlannedPrograms& planned, AtomicOutput& output,
                                    Progress& progress, const std::stop_token& stop = {}) {
  WrittenPrograms files;
  for (size_t p = 0; p < in.sources.size(); ++p) {
    const auto& name = in.sources[p].file->file;
    OutputFile file(output.temp_path() / name, output.display_name(name));
    files.programs.push_back(write_hashed(file, planned.programs[p], &progress,
                                          OutputFile::Durability::at_commit, stop));
  }
  if (in.base) in.base->copy_kept(output.temp_path(), output, &progress);
  files.shards = write_shard_files(planned.plan, context, output, &progress, stop);
  return files;
}

// A .pte output's or a directory of programs' plan on predicted digests, and what its
// writer wrote: the merge (of a .pte output), the programs (a .pte output's one program in
// `planned.programs`) and the new shards.
struct PteGuess {
  std::unique_ptr<PteMerge> merged;
  PlannedPrograms planned;
  WrittenPrograms files;
};

// The output written on predicted digests while the real ones were computed (speculate,
// docs/format-pte.md), made before hashing.
struct PteSpeculation {
  std::unique_ptr<AtomicOutput> output;
  Speculation<PteGuess> guess;
};

// Worth it for 256 MiB (write_while_hashing_from) or more of .pte programs on
// two or more threads, without --base, into a directory (each program packed
// as it is) or a .pte (merged or not); a merge into a directory and packed
// directory inputs (whose digests a check proves beside) are written after hashing.
bool worth_writing_pte_while_hashing(const PackContext& context, const PteInputs& in,
                                     const RangeDigests& digests) {
  const auto& options = context.options;
  if (options.dry_run || in.base || effective_jobs(options.jobs) <= 1 ||
      (context.output == OutputKind::directory && in.merge)) {
    return false;
  }
  for (const auto& a : in.artifacts) {
    if (a.kind == ArtifactKind::pte_directory) return false;
  }
  return worth_writing_while_hashing(digests, options.write_while_hashing_from);
}

// A .pte output's one program on predicted digests: merged first if asked for.
void guess_program(const PackContext& context, const PteInputs& in, RangeDigests& predicted,
                   PteGuess& guess) {
  if (in.merge) {
    guess.merged = merge_pte_sources(context, in, predicted);
    add_program_ranges(guess.merged->source, predicted);  // through the inputs', or predicted
    predict_digests(predicted);
  }
  const auto source = guess.merged ? guess.merged->source : the_one_source(context, in);
  guess.planned.programs.push_back(inline_content(context, source, predicted).content);
}

// Plans the output on predicted digests (predict_digests) and writes it while `digests`
// are computed (speculate). Nullopt, before anything is hashed, when the output cannot be
// made yet (output_before_hashing) or the predicted plan fails in any way (the plain path
// then runs).
std::optional<PteSpeculation> write_while_hashing(const PackContext& context, PteInputs& in,
                                                  RangeDigests& digests, Progress& progress) {
  const bool one_file = context.output == OutputKind::program;
  auto output = output_before_hashing(
      context, one_file ? AtomicOutput::Kind::file : AtomicOutput::Kind::directory);
  if (!output) return std::nullopt;
  RangeDigests predicted = digests;
  predict_digests(predicted);
  auto guess = speculate<PteGuess>(
      [&] {
        PteGuess planned;
        PackSummary scratch;  // the summary takes the real plan's figures
        if (one_file) {
          guess_program(context, in, predicted, planned);
          progress.set_write_total(planned.planned.programs.front().size);
        } else {
          planned.planned = plan_pte_directory(context, in, predicted, progress, scratch);
          rewrite_programs(context, in, planned.planned, scratch);
        }
        return planned;
      },
      [&](PteGuess& planned, const std::stop_token& stop) {
        if (one_file) {
          write_program_file(planned.planned.programs.front(), *output, progress, stop);
        } else {
          planned.files =
              write_program_files(context, in, planned.planned, *output, progress, stop);
        }
      },
      [&] { digests.compute(context.options.jobs, &progress); });
  if (!guess) return std::nullopt;
  return PteSpeculation{std::move(output), std::move(*guess)};
}

// True when the prediction held: every program and new shard gets the bytes,
// from the same sources, the real plan gives them.
bool same_files(const PlannedPrograms& guess, const PlannedPrograms& real) {
  auto same = [](const std::vector<FileContent>& a, const std::vector<FileContent>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), same_bytes);
  };
  return same(guess.programs, real.programs) && same(guess.plan.contents, real.plan.contents);
}

// The speculation's output (its files in `files`) when its prediction held,
// or the writer's error; otherwise null, the speculation dropped.
std::unique_ptr<AtomicOutput> written_while_hashing(std::optional<PteSpeculation>& guess,
                                                    const PlannedPrograms& real, Progress& progress,
                                                    PackSummary& summary, WrittenPrograms& files) {
  if (!guess) return nullptr;
  if (!speculation_holds(guess->guess, same_files(guess->guess.plan.planned, real))) {
    progress.restart_writes();  // the prediction failed: a fresh output
    guess.reset();
    return nullptr;
  }
  summary.written_while_hashing = true;
  files = std::move(guess->guess.plan.files);
  return std::move(guess->output);
}

// A .pte output: its one program, written while hashing when predicted right.
void write_inlined(const PackContext& context, PteInputs& in, const RangeDigests& digests,
                   Progress& progress, PackSummary& summary, std::optional<PteSpeculation>& guess) {
  const auto& options = context.options;
  const auto source = the_one_source(context, in);
  PlannedPrograms real;
  auto inlined = inline_content(context, source, digests);
  summarize_inlined(context, source, inlined, summary);
  if (options.dry_run) return;
  real.programs.push_back(std::move(inlined.content));
  WrittenPrograms unused;
  auto output = written_while_hashing(guess, real, progress, summary, unused);
  if (!output) {
    progress.set_write_total(real.programs.front().size);
    output = std::make_unique<AtomicOutput>(options.output, AtomicOutput::Kind::file);
    write_program_file(real.programs.front(), *output, progress);
  }
  in.directories.finish_bytes();  // hashing may still show progress until here
  progress.stop();
  output->commit();
}

// The programs, the base's kept shards, the new shards and the manifest,
// committed together; the files written while hashing when their prediction held.
void write_programs_directory(const PackContext& context, PteInputs& in,
                              const PlannedPrograms& planned, Progress& progress,
                              PackSummary& summary, std::optional<PteSpeculation>& guess) {
  WrittenPrograms files;
  auto output = written_while_hashing(guess, planned, progress, summary, files);
  if (!output) {
    output = std::make_unique<AtomicOutput>(context.options.output, AtomicOutput::Kind::directory);
    files = write_program_files(context, in, planned, *output, progress);
  }
  Manifest manifest;
  manifest.version = kManifestProgramsVersion;
  for (size_t p = 0; p < in.sources.size(); ++p) {
    manifest.programs.push_back({in.sources[p].file->file,
                                 to_hex(files.programs[p]),
                                 planned.programs[p].size,
                                 in.sources[p].file->program.plans,
                                 {},
                                 planned.set.programs[p].named_keys});
  }
  finish_shards(planned.plan, files.shards, context, *output, manifest);
  summarize_shards(planned.plan, &manifest, summary);
  summary.output_bytes += write_manifest(context, *output, manifest, in.stamp, planned.plan,
                                         planned.set.tensors, summary.notes);
  if (in.base) in.base->summarize(planned.set.tensors, planned.plan, &manifest, summary);
  in.directories.finish_bytes();  // hashing may still show progress until here
  progress.stop();
  output->commit();
}

PackSummary pack_loaded(const PackContext& context, PteInputs& in, RangeDigests& digests,
                        Progress& progress, PackSummary summary) {
  std::optional<PteSpeculation> guess;
  if (worth_writing_pte_while_hashing(context, in, digests))
    guess = write_while_hashing(context, in, digests, progress);
  prepare_sources(context, in, digests, progress, summary);  // hashes what is left
  if (summary.output_kind == OutputKind::program) {
    write_inlined(context, in, digests, progress, summary, guess);
    progress.stop();
    return summary;
  }
  auto planned = plan_pte_directory(context, in, digests, progress, summary);
  rewrite_programs(context, in, planned, summary);
  if (context.options.dry_run) {
    summarize_shards(planned.plan, nullptr, summary);
    if (in.base) in.base->summarize(planned.set.tensors, planned.plan, nullptr, summary);
    progress.stop();
    return summary;
  }
  write_programs_directory(context, in, planned, progress, summary, guess);
  return summary;
}

}  // namespace

PackSummary pack_pte(const PackContext& context) {
  const auto& options = context.options;
  const std::string first = options.inputs.front().path.string();
  if (options.sharding.format != ShardFormat::ptd) {
    fail(ErrorCode::usage,
         "{}: .pte programs load their data from .ptd shards; --shard-format {} is not possible",
         first, shard_format_name(options.sharding.format));
  }
  if (context.output == OutputKind::package) {
    fail(ErrorCode::usage,
         "{}: a .ptn package holds program graphs; pack .pte programs (here {}) into a directory "
         "or a .pte",
         options.output.string(), first);
  }
  PteInputs in;
  load_inputs(context, in);
  auto start = start_pack(context, kManifestProgramsVersion, in.paths, in.artifacts);
  in.base = std::move(start.base);
  in.stamp = start.stamp;
  PackSummary summary = std::move(start.summary);
  RangeDigests digests;
  add_proven_digests(in, digests);
  for (const auto& s : in.sources) {
    add_program_ranges(s, digests);
    if (in.merge) pte::add_merge_ranges(s.file->program, *s.data, digests);
  }
  Progress progress;
  progress.set_hash_total(digests.distinct_bytes() + in.directories.hash_total());
  if (!options.dry_run) progress.expect_writes();
  progress.start(options.progress);
  // Directory inputs are checked while the output is planned and written on
  // their manifests' digests; nothing is committed before the check passes.
  in.directories.start_bytes(&progress);
  try {
    auto summary_out = pack_loaded(context, in, digests, progress, std::move(summary));
    in.directories.finish_bytes();
    return summary_out;
  } catch (...) {
    in.directories.finish_bytes();  // a damaged input explains any other error
    throw;
  }
}

}  // namespace ptepack::detail
