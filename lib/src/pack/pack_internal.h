// Shared between the pack orchestration and the two output writers.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "core/directory_plan.h"
#include "core/file_content.h"
#include "hash/parallel_hash.h"
#include "pack/base_release.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/containers/manifest.h"
#include "ptepack/core/storage.h"
#include "ptepack/io/output_file.h"
#include "ptepack/io/progress.h"
#include "ptepack/pack/pack.h"
#include "ptepack/verify/reader.h"

namespace ptepack::detail {

// One pack run's context (docs/architecture.md, "Decisions taken once": what the output is): built
// once in pack(), after the recorded shard options are applied and before any input is read, and
// passed to every stage of both front ends, which read these values instead of deciding them again.
struct PackContext {
  PackContext(const PackOptions& options, OutputKind output);
  const PackOptions& options;
  OutputKind output;  // output_kind(options.output), asked once
  // How the output stores equal tensors once: the bytes for .ptd shards (and so for .pte
  // programs), the dtype, shape and bytes for a package or safetensors shards.
  DedupRule dedup;
};

// Everything decided before the first byte is written.
// The release fields of the output's manifest (docs/signing.md): --release N,
// checked against --base's release, with the base manifest's SHA-256; or, for a
// repack of one packed directory without --release, the input's own.
struct ReleaseStamp {
  std::optional<uint64_t> release;
  std::optional<std::string> base_manifest_sha256;
  std::optional<std::string> note;  // the release number chosen without --release
};

struct PreparedPack {
  MergedProgram merged;
  ReleaseStamp stamp;
  std::unique_ptr<BaseRelease> base;    // --base, opened and checked before any input is hashed
  std::vector<StoredTensor> tensors;    // sorted by key
  flatbuffers::DetachedBuffer program;  // the final .ptg
  DedupRule dedup{};                    // PackContext::dedup, set by pack_graphs
  [[nodiscard]] std::string_view program_bytes() const {
    return {reinterpret_cast<const char*>(program.data()), program.size()};
  }
};

// Fill `summary` with the plan; when `output` is non-null, also write into its
// temporary path (the caller commits).
void write_package(const PreparedPack& prepared, AtomicOutput* output, Progress* progress,
                   PackSummary& summary);
// A package planned on predicted dedup groups: the groups, and what the writer summarized.
struct PackagePlan {
  std::vector<StorageGroup> groups;
  PackSummary summary;
};

// Whether an output of these tensors (a package or a directory) is worth
// writing while it is hashed: at least `from_bytes` of tensors (0: never),
// and little to sample.
[[nodiscard]] bool worth_writing_while_hashing(const std::vector<StoredTensor>& tensors,
                                               uint64_t from_bytes);
// The same for the ranges `digests` has yet to hash (the .pte front end).
[[nodiscard]] bool worth_writing_while_hashing(const RangeDigests& digests, uint64_t from_bytes);
// The output, made before its inputs are hashed so it can be written while they
// are; null when its parent directory is missing (making it would leave
// directories behind an input's error) or it cannot be made (that error then
// comes in its usual place, after hashing).
[[nodiscard]] std::unique_ptr<AtomicOutput> output_before_hashing(const PackContext& context,
                                                                  AtomicOutput::Kind kind);

// Runs plan(), the output planned on predicted digests: false when it raised
// any ptepack Error, internal ones included. A prediction that cannot be
// confirmed never decides the outcome: the caller then runs the plain path on
// the real digests, which gives any error there is in its usual order.
[[nodiscard]] bool planned_on_prediction(const std::function<void()>& plan);

// Runs write() on a thread of its own while hash() runs on this one; the
// writer's error goes to `write_error` (for the caller to raise only if the
// prediction it wrote on holds). An error of hash() asks the writer to stop
// at its next chunk, waits for it, and is rethrown.
void write_beside_hashing(const std::function<void(const std::stop_token&)>& write,
                          const std::function<void()>& hash, std::exception_ptr& write_error);

// An output written on a plan made on predicted digests, while the real ones were computed:
// the plan (with what its writer wrote), and the writer's error, raised only if it holds.
template <typename Plan>
struct Speculation {
  Plan plan;
  std::exception_ptr write_error;
};

// The one speculation driver, for every kind of output (docs/performance.md): plan() on the
// predicted digests, then write(plan, stop) on a thread of its own while hash() computes the
// real digests on this one. Nullopt, before hash() is called, when plan() raised any ptepack
// error (planned_on_prediction): the caller then hashes and plans as usual.
template <typename Plan, typename PlanFn, typename WriteFn>
[[nodiscard]] std::optional<Speculation<Plan>> speculate(PlanFn&& plan, WriteFn&& write,
                                                         const std::function<void()>& hash) {
  Speculation<Plan> s;
  if (!planned_on_prediction([&] { s.plan = plan(); })) return std::nullopt;
  write_beside_hashing([&](const std::stop_token& stop) { write(s.plan, stop); }, hash,
                       s.write_error);
  return s;
}

// After hashing: true when the plan on the real digests is the predicted one (`holds`); the
// written output is then byte for byte the plain path's, or the writer's error is raised.
// False: the output must be written again.
template <typename Plan>
[[nodiscard]] bool speculation_holds(const Speculation<Plan>& s, bool holds) {
  if (!holds) return false;
  if (s.write_error) std::rethrow_exception(s.write_error);
  return true;
}

// Predicts the package's dedup groups from samples of the bytes of every
// tensor whose length another shares (writing each tensor's prediction into
// its sha256), then writes the package on them into `output` while hash() runs
// (speculate). hash() must give every tensor its real digest.
[[nodiscard]] std::optional<Speculation<PackagePlan>> write_package_while_hashing(
    PreparedPack& prepared, AtomicOutput& output, Progress* progress, const PackSummary& summary,
    const std::function<void()>& hash);

// True when the real digests give the predicted groups (speculation_holds): the written
// package is then byte for byte what write_package writes, and `summary` gets its figures.
// False leaves `summary` alone; the package must be written again.
[[nodiscard]] bool confirm_package(const PreparedPack& prepared,
                                   const Speculation<PackagePlan>& speculation, Progress* progress,
                                   PackSummary& summary);
// Gives every tensor a predicted digest (its sha256 field): for one whose byte
// length another tensor shares, the digest of three 4 KiB samples (start,
// middle, end; all of it up to 12 KiB); for the others one of their own.
// Equal bytes get equal predictions; unequal bytes almost always differ.
void predict_digests(std::vector<StoredTensor>& tensors);
// The same for every range `digests` has yet to hash (set as if hashed): a
// sampled digest for a range whose length another shares, one of its own otherwise.
void predict_digests(RangeDigests& digests);
// True when both list the same groups with the same members, in order.
[[nodiscard]] bool same_groups(const std::vector<StorageGroup>& a,
                               const std::vector<StorageGroup>& b);

// Frees prepared.program once program.ptg is written.
void write_directory(PreparedPack& prepared, const PackContext& context, AtomicOutput* output,
                     Progress* progress, PackSummary& summary);

// What a directory's writer wrote under temporary names.
struct WrittenFiles {
  Digest program{};
  uint64_t program_size = 0;
  std::vector<Digest> shards;  // SHA-256 of each planned shard's file
};
// A directory planned on predicted dedup groups, and what its writer wrote.
struct DirectoryGuess {
  DirectoryPlan plan;
  WrittenFiles files;
};
// The directory form of write_package_while_hashing: predicts the groups
// (predict_digests), plans and lays out the shards on them, and writes
// program.ptg and the shards while hash() runs (speculate). Nullopt, before
// hash() is called, when the predicted plan fails.
[[nodiscard]] std::optional<Speculation<DirectoryGuess>> write_directory_while_hashing(
    PreparedPack& prepared, const PackContext& context, AtomicOutput& output, Progress* progress,
    const std::function<void()>& hash);
// True when the real digests give the predicted groups (speculation_holds): the shards
// written are then byte for byte what write_directory writes; they are named and the
// manifest written, and `summary` gets its figures. False leaves `summary` alone; the
// directory must be written again.
[[nodiscard]] bool confirm_directory(PreparedPack& prepared,
                                     const Speculation<DirectoryGuess>& speculation,
                                     const PackContext& context, AtomicOutput& output,
                                     Progress* progress, PackSummary& summary);

// Streams `content` into `file`, hashed as it goes (stopping at the next chunk
// once `stop` is requested), then finishes the file; returns its SHA-256.
Digest write_hashed(OutputFile& file, const FileContent& content, Progress* progress,
                    OutputFile::Durability durability, const std::stop_token& stop = {});
// Shard helpers shared by the program-graph and .pte directory writers.
Digest write_small_file(const std::filesystem::path& path, const std::string& display,
                        std::string_view bytes);
// Refuses (invalid_input, naming the file) an output of `size` bytes above a
// limit its readers enforce: pack never writes what dump and verify refuse.
void check_readable_size(const std::string& display, uint64_t size, uint64_t limit);
[[nodiscard]] ReleaseStamp release_stamp(const PackContext& context,
                                         const std::vector<const Manifest*>& input_manifests);

// What both front ends decide once their inputs are read, before any byte is hashed.
struct PackStart {
  std::unique_ptr<BaseRelease> base;  // --base, opened and checked
  ReleaseStamp stamp;
  PackSummary summary;  // output, its kind, dry run and shard options filled
};
// --base opened and checked as a directory of `version` (every file of it
// counts as read), the output checked against every path read (not in a dry
// run), the release stamp decided from the inputs' manifests.
[[nodiscard]] PackStart start_pack(const PackContext& context, int version,
                                   std::vector<std::filesystem::path>& read_paths,
                                   const std::vector<Artifact>& inputs);
// manifest.json (in the output's temporary directory) with the stamp and the plan's tensors
// (describe_tensors, streamed: manifest.tensors is not read), refused above
// Limits::max_manifest_bytes; with --sign, then DIR/model.sig over every file
// of the release; else a repack of one signed directory carries its model.sig when
// the manifest written is byte for byte the signed one, and notes that it does not
// otherwise (`notes`). Returns the bytes written.
uint64_t write_manifest(const PackContext& context, AtomicOutput& output, Manifest& manifest,
                        const ReleaseStamp& stamp, const DirectoryPlan& plan,
                        const std::vector<StoredTensor>& tensors, std::vector<std::string>& notes);
// The output's one directory plan (plan_directory; with --base, on its reuse
// plan), with the output named in its placement errors.
[[nodiscard]] DirectoryPlan plan_for_output(const std::vector<StoredTensor>& tensors,
                                            const std::vector<StorageGroup>& groups,
                                            const ProgramUse& use, const PackContext& context,
                                            const BaseRelease* base);
// Writes a plan's new shards in parallel under temporary names (.shard-N.tmp),
// each hashed as it streams; their digests.
[[nodiscard]] std::vector<Digest> write_shard_files(const DirectoryPlan& plan,
                                                    const PackContext& context,
                                                    AtomicOutput& output, Progress* progress,
                                                    const std::stop_token& stop = {});
// Describes the written plan in `manifest` (describe_directory) and renames
// the new shards to the names it gives them (--base's kept shards are copied
// by BaseRelease::copy_kept).
void finish_shards(const DirectoryPlan& plan, const std::vector<Digest>& digests,
                   const PackContext& context, AtomicOutput& output, Manifest& manifest);
// The summary's shards (in manifest order, named from the `written` manifest,
// or unnamed in a dry run), their bytes added to output_bytes, and each
// program's shard count and (written) list: derived from the plan alone.
void summarize_shards(const DirectoryPlan& plan, const Manifest* written, PackSummary& summary);

// True when PATH is a .pte program or a directory (or manifest) of programs.
[[nodiscard]] bool holds_pte(const std::filesystem::path& path);
// Every path an input artifact reads: itself, its data files, every file its
// tensors live in (index and manifest shards), its programs.
void add_read_paths(const Artifact& artifact, std::vector<std::filesystem::path>& paths);
// Refuses outputs equal to, inside or containing any input path (usage error
// naming both), and outputs that would clobber an unrelated directory.
void check_output_target(const PackContext& context,
                         const std::vector<std::filesystem::path>& input_paths);

// The .pte front end's pack (inputs are .pte programs or directories of them).
[[nodiscard]] PackSummary pack_pte(const PackContext& context);
// The program-graph front end's pack (inputs are graphs, packages or directories of them).
[[nodiscard]] PackSummary pack_graphs(const PackContext& context);

// Summary fields shared by both writers: dedup, aliases and byte counts.
// Also tells `progress` how many bytes the writer will copy.
void summarize_groups(const std::vector<StoredTensor>& tensors,
                      const std::vector<StorageGroup>& groups, PackSummary& summary,
                      Progress* progress);

}  // namespace ptepack::detail

namespace ptepack::detail {

class DirectoryCheck;

// The packed directories among pack's inputs, checked exactly as `verify`
// checks them (the same code): a damaged input is refused with verify's
// problem lines and exit code, and nothing is written. The structure is
// checked before the input is read; the bytes (shard and program files whole,
// every tensor) in one parallel pass where pack hashes its inputs, after which
// every digest the manifests record is proven and none of those tensors is
// hashed again.
class DirectoryInputs {
 public:
  DirectoryInputs();
  ~DirectoryInputs();
  DirectoryInputs(const DirectoryInputs&) = delete;
  DirectoryInputs& operator=(const DirectoryInputs&) = delete;

  // Sizes the list for `inputs` slots (each filled by at most one thread).
  void reserve(size_t inputs, unsigned jobs);
  // Input `slot` read by the one reader (load_artifact, strict). A packed directory or its
  // manifest: its structure checked, and the artifact built from that check; its bytes are
  // checked later (check_bytes, start_bytes). A program its directory's manifest lists,
  // read with the shards listed for it, is checked against that record by the reader.
  [[nodiscard]] Artifact read(size_t slot, const InputSpec& spec, ProgramForm form);
  [[nodiscard]] uint64_t hash_total() const;
  // Every checked directory's bytes; throws verify_failed with the problems.
  void check_bytes(Progress* progress);
  // The same on a thread of its own, while the output is planned and written
  // on the digests the manifests record; finish_bytes() joins it and throws
  // what check_bytes would (again at every call), and must come before the
  // output is committed, and before any other error is reported (a damaged
  // input explains it).
  void start_bytes(Progress* progress);
  void finish_bytes();

 private:
  struct Slot;
  std::vector<std::unique_ptr<Slot>> slots_;
  unsigned jobs_ = 0;
  std::exception_ptr background_error_;
  std::thread background_;
};

}  // namespace ptepack::detail
