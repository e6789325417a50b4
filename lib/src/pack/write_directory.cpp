// Directory writer: program.ptg, content-named weight shards, index (safetensors) and manifest.
#include <filesystem>

#include <algorithm>
#include <exception>
#include <thread>

#include "pack/base_release.h"
#include "pack/pack_internal.h"
#include "ptepack/sign/sign.h"
#include "ptepack/base/error.h"
#include "base/parallel.h"
#include "ptepack/containers/manifest.h"
#include "containers/safetensors.h"
#include "core/directory_plan.h"

namespace ptepack::detail {

namespace fs = std::filesystem;

namespace {

// A directory output's file, whole (made durable at the commit).
void write_whole_file(const fs::path& path, const std::string& display, std::string_view bytes) {
  OutputFile file(path, display);
  file.write_at(0, bytes);
  file.finish(bytes.size(), OutputFile::Durability::at_commit);
}

// Runs `first` on a thread of its own while `second` runs on this one. When
// both fail, first's error is thrown, as if they had run one after the other.
void run_beside(const std::function<void()>& first, const std::function<void()>& second) {
  std::exception_ptr first_error;
  std::exception_ptr second_error;
  std::jthread thread([&] {
    try {
      first();
    } catch (...) {
      first_error = std::current_exception();
    }
  });
  try {
    second();
  } catch (...) {
    second_error = std::current_exception();
  }
  thread.join();
  if (first_error) std::rethrow_exception(first_error);
  if (second_error) std::rethrow_exception(second_error);
}

}  // namespace

Digest write_hashed(OutputFile& file, const FileContent& content, Progress* progress,
                    OutputFile::Durability durability, const std::stop_token& stop) {
  StreamOptions stream;
  stream.sha256 = true;
  stream.stop = stop;
  auto digest = write_content(file, content, stream, progress).sha256;
  file.finish(content.size, durability);
  return digest;
}

Digest write_small_file(const fs::path& path, const std::string& display, std::string_view bytes) {
  write_whole_file(path, display, bytes);
  return sha256(bytes);
}

void check_readable_size(const std::string& display, uint64_t size, uint64_t limit) {
  if (size > limit) {
    fail_input("{}: {} bytes would exceed the limit of {} bytes that readers accept", display, size,
               limit);
  }
}

ReleaseStamp release_stamp(const PackContext& context,
                           const std::vector<const Manifest*>& input_manifests) {
  const auto& options = context.options;
  ReleaseStamp stamp;
  if (!options.base) {
    if (options.release) {
      stamp.release = options.release;
    } else if (input_manifests.size() == 1 && input_manifests.front() != nullptr) {
      stamp.release = input_manifests.front()->release;  // a repack carries both unchanged
      stamp.base_manifest_sha256 = input_manifests.front()->base_manifest_sha256;
    }
    return stamp;
  }
  // With --base the chain is unbroken: a numbered base is followed by the next
  // number, and a numbered release records its base's digest. A release without
  // a number on a base without one records neither, so that packing a release's
  // content on it reproduces it byte for byte.
  stamp.release = options.release;
  const auto manifest_path = directory_paths(*options.base).manifest;
  auto file = InputFile::open(manifest_path);
  if (file->size() > Limits::max_manifest_bytes) {
    fail_input("{}: manifest too large", manifest_path.string());
  }
  auto bytes = file->read_range(0, file->size());
  const std::string text(bytes.begin(), bytes.end());
  const auto old = parse_manifest(text, manifest_path.string());
  if (options.release && old.release && *options.release <= *old.release) {
    fail(ErrorCode::usage, "--release {} must be greater than --base {}'s release {}",
         *options.release, options.base->string(), *old.release);
  }
  if (!options.release && old.release) {
    if (*old.release >= kMaxRelease) {
      fail(ErrorCode::usage, "--base {}'s release {} is the last one: give no --base",
           options.base->string(), *old.release);
    }
    stamp.release = *old.release + 1;
    stamp.note = fmt::format("release {}: the next after --base {}'s release {} (--release N "
                             "sets another)",
                             *stamp.release, options.base->string(), *old.release);
  }
  if (stamp.release) stamp.base_manifest_sha256 = to_hex(sha256(std::string_view(text)));
  return stamp;
}

// A repack of one signed directory: its model.sig still signs the output when the manifest
// written is the signed one byte for byte (it records every other file's digest, and the
// output's files match it). Returns the bytes written.
uint64_t carry_signature(const PackContext& context, const fs::path& dir,
                         const std::string& display, const Digest& written,
                         std::vector<std::string>& notes) {
  const auto& options = context.options;
  if (options.inputs.size() != 1 || options.base) return 0;
  std::error_code ec;
  const auto& path = options.inputs.front().path;
  if (!fs::is_directory(path, ec) && path.filename() != "manifest.json") return 0;
  const auto input = directory_paths(path);
  const auto signature = input.dir / std::string(kSignatureFileName);
  if (!fs::is_directory(input.dir, ec) || !fs::is_regular_file(signature, ec)) return 0;
  auto manifest = InputFile::open(input.manifest);
  if (manifest->size() > Limits::max_manifest_bytes ||
      sha256(std::span<const uint8_t>(manifest->read_range(0, manifest->size()))) != written) {
    notes.push_back(fmt::format("{} is not carried over: {} is not the signed release byte for "
                                "byte (sign it with `ptepack sign`)",
                                signature.string(), options.output.string()));
    return 0;
  }
  auto bundle = InputFile::open(signature);
  if (bundle->size() > kMaxBundleBytes) return 0;
  auto bytes = bundle->read_range(0, bundle->size());
  write_small_file(dir / std::string(kSignatureFileName), display,
                   std::string(bytes.begin(), bytes.end()));
  notes.push_back(fmt::format("{} carried over: the output is the signed release byte for byte",
                              signature.string()));
  return bytes.size();
}

uint64_t write_manifest(const PackContext& context, AtomicOutput& output, Manifest& manifest,
                        const ReleaseStamp& stamp, const DirectoryPlan& plan,
                        const std::vector<StoredTensor>& tensors, std::vector<std::string>& notes) {
  const auto& options = context.options;
  const auto& dir = output.temp_path();
  const auto display = output.display_name("manifest.json");
  manifest.release = stamp.release;
  manifest.base_manifest_sha256 = stamp.base_manifest_sha256;
  // Streamed: written and hashed piece by piece, never one string.
  OutputFile file(dir / "manifest.json", display);
  Sha256 hash;
  uint64_t size = 0;
  const ManifestTensorSource entries = [&](const ManifestTensorVisitor& each) {
    describe_tensors(plan, tensors, manifest.shards, each);
  };
  auto sink = [&](std::string_view piece) {
    if (size + piece.size() <= Limits::max_manifest_bytes) {  // beyond it, only counted
      file.write_at(size, piece);
      hash.update(piece);
    }
    size += piece.size();
  };
  write_manifest_json(manifest, sink, &entries);
  check_readable_size(display, size, Limits::max_manifest_bytes);
  file.finish(size, OutputFile::Durability::at_commit);  // a directory output's file
  if (!options.sign_key) return size + carry_signature(context, dir, display, hash.finish(), notes);
  const auto key = SigningKey::load(*options.sign_key, options.sign_password);
  const auto bundle =
      sign_manifest(key, options.output.filename().string(), manifest, hash.finish());
  write_small_file(dir / std::string(kSignatureFileName), display, bundle);
  return size + bundle.size();
}

DirectoryPlan plan_for_output(const std::vector<StoredTensor>& tensors,
                              const std::vector<StorageGroup>& groups, const ProgramUse& use,
                              const PackContext& context, const BaseRelease* base) {
  const auto& options = context.options;
  const auto output = options.output.string();
  if (base == nullptr) return plan_directory(tensors, groups, use, options.sharding, output);
  return plan_directory(tensors, groups, use, options.sharding, output, base->reuse(),
                        &base->manifest());
}

void summarize_shards(const DirectoryPlan& plan, const Manifest* written, PackSummary& summary) {
  summary.shards.clear();
  const size_t kept = plan.kept.size();
  for (size_t s = 0; s < plan.shard_count(); ++s) {
    ShardSummary out;
    out.file = written != nullptr ? written->shards[s].file : s < kept ? plan.kept[s].file : "";
    out.size = plan.shard_size(s);
    out.payload_bytes = plan.shard_payload(s);
    out.keys = s < kept ? plan.kept[s].keys : plan.keys[s - kept];
    out.reused = s < kept;
    out.stale_bytes = s < kept ? plan.kept_stale_bytes[s] : 0;
    summary.output_bytes += out.size;
    summary.shards.push_back(std::move(out));
  }
  for (size_t p = 0; p < plan.program_shards.size(); ++p) {
    auto& program = summary.programs[p];
    program.shard_count = plan.program_shards[p].size();
    if (written != nullptr) program.shards = written->programs[p].shards;
  }
}

std::vector<Digest> write_shard_files(const DirectoryPlan& plan, const PackContext& context,
                                      AtomicOutput& output, Progress* progress,
                                      const std::stop_token& stop) {
  const auto& dir = output.temp_path();
  // Shards are independent files: write them in parallel, each hashed as it streams.
  std::vector<Digest> digests(plan.placed.size());
  parallel_for(plan.placed.size(), effective_jobs(context.options.jobs), [&](size_t s) {
    auto temp_name = fmt::format(".shard-{}.tmp", s);
    OutputFile file(dir / temp_name, output.display_name(temp_name));
    digests[s] = write_hashed(file, plan.contents[s], progress, OutputFile::Durability::at_commit,
                              stop);
  });
  return digests;
}

void finish_shards(const DirectoryPlan& plan, const std::vector<Digest>& digests,
                   const PackContext& context, AtomicOutput& output, Manifest& manifest) {
  const auto& options = context.options;
  const auto& dir = output.temp_path();
  describe_directory(plan, digests, options.sharding, options.shard_prefix, manifest);
  for (size_t s = 0; s < plan.placed.size(); ++s) {
    const auto& name = manifest.shards[plan.kept.size() + s].file;
    std::error_code ec;
    fs::rename(dir / fmt::format(".shard-{}.tmp", s), dir / name, ec);
    if (ec) {
      fail(ErrorCode::io, "{}: cannot rename shard: {}", output.display_name(name), ec.message());
    }
  }
}

namespace {

// The directory's plan on the tensors' digests (with --base, its kept shards
// first); fills the summary's dedup figures and the base's notes.
DirectoryPlan plan_graph_directory(const PreparedPack& prepared, const PackContext& context,
                                   Progress* progress, PackSummary& summary) {
  const auto& tensors = prepared.tensors;
  BaseRelease* base = prepared.base.get();
  auto groups = group_tensors(tensors, prepared.dedup);
  summarize_groups(tensors, groups, summary, progress);
  if (base != nullptr) base->plan(tensors, context.options, summary);
  return plan_for_output(tensors, groups, {}, context, base);
}

// A program graph's directory written into `output`: what its stages share. --base's kept
// shards come from prepared.base (a directory written while hashing has no base).
class GraphDirectoryWriter {
 public:
  GraphDirectoryWriter(PreparedPack& prepared, const PackContext& context, AtomicOutput& output,
                       Progress* progress)
      : prepared_(prepared), context_(context), output_(output), progress_(progress) {}

  // program.ptg and the new shards under temporary names. The program is freed once
  // written, unless it may be needed again (a prediction not yet confirmed).
  WrittenFiles write_files(const DirectoryPlan& plan, bool keep_program,
                           const std::stop_token& stop = {}) {
    WrittenFiles files;
    files.program =
        write_small_file(output_.temp_path() / "program.ptg", output_.display_name("program.ptg"),
                         prepared_.program_bytes());
    files.program_size = prepared_.program_bytes().size();
    if (!keep_program) prepared_.program = {};  // its memory is free for the manifest
    files.shards = write_shard_files(plan, context_, output_, progress_, stop);
    return files;
  }

  // The kept shards copied, the new ones named by their digests, then the index and, last,
  // the manifest (its presence marks a complete directory); the summary's shards and byte
  // counts derived from the plan and that manifest.
  void finish(const DirectoryPlan& plan, const WrittenFiles& files, PackSummary& summary) {
    const auto& tensors = prepared_.tensors;
    const BaseRelease* base = prepared_.base.get();
    const auto& dir = output_.temp_path();
    auto display = [&](const std::string& name) { return output_.display_name(name); };
    Manifest manifest;
    manifest.program = {"program.ptg", to_hex(files.program), files.program_size};
    if (base != nullptr) base->copy_kept(dir, output_, progress_);
    finish_shards(plan, files.shards, context_, output_, manifest);
    manifest.state.assign(prepared_.merged.state.begin(), prepared_.merged.state.end());
    summary.output_bytes = files.program_size;
    summarize_shards(plan, &manifest, summary);
    if (context_.options.sharding.format == ShardFormat::safetensors) {
      auto index = safetensors::index_json(manifest.total_size, weight_map_of(manifest));
      check_readable_size(display("model.safetensors.index.json"), index.size(),
                          Limits::max_header_bytes);
      write_small_file(dir / "model.safetensors.index.json",
                       display("model.safetensors.index.json"), index);
      summary.output_bytes += index.size();
    }
    summary.output_bytes +=
        write_manifest(context_, output_, manifest, prepared_.stamp, plan, tensors, summary.notes);
    if (base != nullptr) base->summarize(tensors, plan, &manifest, summary);
  }

 private:
  PreparedPack& prepared_;
  const PackContext& context_;
  AtomicOutput& output_;
  Progress* progress_;
};

}  // namespace

void write_directory(PreparedPack& prepared, const PackContext& context, AtomicOutput* output,
                     Progress* progress, PackSummary& summary) {
  const BaseRelease* kept = prepared.base.get();
  auto plan = plan_graph_directory(prepared, context, progress, summary);
  if (output == nullptr) {
    summary.output_bytes = prepared.program_bytes().size();
    summarize_shards(plan, nullptr, summary);
    if (kept != nullptr) kept->summarize(prepared.tensors, plan, nullptr, summary);
    return;
  }
  GraphDirectoryWriter writer(prepared, context, *output, progress);
  if (effective_jobs(context.options.jobs) <= 1) {
    writer.finish(plan, writer.write_files(plan, false), summary);
    return;
  }
  // program.ptg is written on a thread of its own, beside the shards and the
  // manifest: the manifest needs only its digest, taken here first.
  WrittenFiles files;
  files.program = sha256(prepared.program_bytes());
  files.program_size = prepared.program_bytes().size();
  run_beside(
      [&] {
        write_whole_file(output->temp_path() / "program.ptg", output->display_name("program.ptg"),
                         prepared.program_bytes());
        prepared.program = {};  // its memory is free once written
      },
      [&] {
        files.shards = write_shard_files(plan, context, *output, progress);
        writer.finish(plan, files, summary);
      });
}

std::optional<Speculation<DirectoryGuess>> write_directory_while_hashing(
    PreparedPack& prepared, const PackContext& context, AtomicOutput& output, Progress* progress,
    const std::function<void()>& hash) {
  predict_digests(prepared.tensors);
  return speculate<DirectoryGuess>(
      [&] {
        PackSummary predicted;  // the summary takes the real groups' figures (confirm_directory)
        return DirectoryGuess{plan_graph_directory(prepared, context, progress, predicted), {}};
      },
      [&](DirectoryGuess& guess, const std::stop_token& stop) {
        guess.files = GraphDirectoryWriter(prepared, context, output, progress)
                          .write_files(guess.plan, true, stop);
      },
      hash);
}

bool confirm_directory(PreparedPack& prepared, const Speculation<DirectoryGuess>& speculation,
                       const PackContext& context, AtomicOutput& output, Progress* progress,
                       PackSummary& summary) {
  auto groups = group_tensors(prepared.tensors, prepared.dedup);
  if (!speculation_holds(speculation, same_groups(groups, speculation.plan.plan.groups)))
    return false;
  prepared.program = {};
  summarize_groups(prepared.tensors, groups, summary, progress);
  GraphDirectoryWriter(prepared, context, output, progress)
      .finish(speculation.plan.plan, speculation.plan.files, summary);
  summary.written_while_hashing = true;
  return true;
}

}  // namespace ptepack::detail
