// `pack`: inputs -> merged, deduplicated program -> .ptn package or shard directory.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ptepack/artifact/artifact.h"
#include "ptepack/core/shard_plan.h"
#include "ptepack/graph/merge.h"
#include "ptepack/io/progress.h"
#include "ptepack/trust/signature.h"

namespace ptepack {

// Where a directory of two or more programs puts its tensors (docs/shard-planner.md).
enum class Placement {
  sets,    // shards never mix sharing sets: each program loads only what it uses
  single,  // one first-fit over everything (runtimes that take one data file)
};

// The shard options a caller gave (the CLI marks each one given on its command
// line). A directory output packed from one packed directory alone takes every
// option not given from that directory's manifest (docs/manifest.md), and with
// none given keeps its shard layout (docs/shard-planner.md), so a repack
// reproduces it; callers that leave PackOptions::given unset get exactly the
// options they set.
struct GivenShardOptions {
  bool max_shard_bytes = false;
  bool cap_mode = false;
  bool format = false;
  bool oversize = false;
  bool alignment = false;
  bool prefix = false;
  bool placement = false;
  bool max_shard_tensors = false;
  // Any of them (shard_options()): a repack given none keeps the directory's layout too.
  [[nodiscard]] bool any() const;
};

struct PackOptions {
  std::vector<InputSpec> inputs;  // parsed INPUT arguments (parse_input_spec)
  std::filesystem::path output;
  unsigned jobs = 0;  // 0: all cores
  ShardingOptions sharding;
  Placement placement = Placement::sets;
  std::string shard_prefix{kDefaultShardPrefix};
  // --base OLD: the previous release (a packed directory or its manifest.json),
  // whose shard files are kept whole where they still fit (docs/shard-planner.md).
  std::optional<std::filesystem::path> base;
  bool dry_run = false;
  bool force = false;  // replace an existing directory that is not a ptepack output
  // Keep every renamed key in the summary; false counts them only (a
  // 1,000,000-tensor pack renames about 750,000 keys: 140 MB of strings).
  bool list_renames = true;
  // A .ptn or a program-graph directory holding at least this many bytes of
  // tensors is written while it is hashed, on dedup groups predicted from
  // samples of the bytes, and written again if the digests disagree
  // (docs/performance.md); 0: hash, then write.
  uint64_t write_while_hashing_from = 256ULL << 20;
  ProgressMode progress = ProgressMode::never;  // --progress
  // .pte inputs: --merge NAME.pte, the merged program of a directory output
  // (several programs become one; docs/rename-rules.md), and --method, the
  // methods to keep (every one when empty).
  std::optional<std::string> merge;
  std::vector<std::string> methods;
  // With a merge: mutable buffers of one name become one state every method
  // sees (memory id 2), as ExecuTorch's share_mutable_buffers lays them out.
  bool share_state = false;
  // --constant-alignment N: the offset alignment of every constant segment a
  // .pte output lays out (a power of two from 16 to 64 KiB); unset: the
  // largest alignment the inputs' exporters used, read from evidence
  // (docs/format-pte.md, "Alignment from evidence").
  std::optional<uint64_t> constant_alignment;
  // Signed releases (docs/signing.md), directory outputs only: --release N (1 to
  // 2^53-1, greater than --base's), and --sign KEY.pem, the signature written
  // as DIR/model.sig before the output is committed.
  std::optional<uint64_t> release;
  std::optional<std::filesystem::path> sign_key;
  KeyPassword sign_password;
  std::optional<GivenShardOptions> given;  // set: a lone packed directory's options fill the rest
};

// Pack's shard options, one row each, in the order a note names them: the flag, the
// words it takes (none: a size, a number or free text), whether a caller gave it, and how
// a lone packed directory's manifest supplies it when it was not given (`take` sets it in
// the options when the manifest records a value other than the default, and returns the
// option as it would be typed, for the note). The CLI (which flags were given, the words
// each accepts), GivenShardOptions::any and a repack's recorded options read this table.
struct ShardOption {
  std::string_view flag;
  std::array<std::string_view, 2> words;
  bool GivenShardOptions::*given;
  std::optional<std::string> (*take)(const Manifest& manifest, PackOptions& options);
};
[[nodiscard]] std::span<const ShardOption> shard_options();

struct ShardSummary {
  std::string file;   // empty in a dry run (names come from the written bytes)
  uint64_t size = 0;  // exact when written; the planner's bound in a dry run
  uint64_t payload_bytes = 0;
  std::vector<std::string> keys;  // the keys this release reads from it
  bool reused = false;            // kept whole from the --base release
  uint64_t stale_bytes = 0;       // payload of a reused shard no key reads
};

// What --base kept, and what a device holding the base downloads.
struct BaseSummary {
  std::string path;
  std::optional<std::string> fresh_reason;  // why nothing was reused, when so
  size_t shards_reused = 0;
  size_t shards_new = 0;
  uint64_t stale_bytes = 0;         // carried in reused shards, never read
  uint64_t stored_again_keys = 0;   // placed new beside a copy a reused shard holds
  uint64_t stored_again_bytes = 0;  // their distinct bytes
  // Payload of keys whose (key, SHA-256) the base lacks, plus program files it lacks.
  uint64_t changed_bytes = 0;
  // NEW's files, manifest aside, whose name and SHA-256 the base lacks (none in a dry run).
  std::optional<uint64_t> download_bytes;
  uint64_t release_bytes = 0;  // all of NEW's files, manifest aside (0 in a dry run)
};

// A .pte program written by pack (directory of programs, or a .pte output).
struct ProgramSummary {
  std::string file;   // its file name in the output
  std::string input;  // where it came from
  std::vector<std::string> methods;
  std::vector<std::string> shards;  // data files it needs, in load order (empty in a dry run)
  size_t shard_count = 0;
  uint64_t size = 0;
};

// A method of the output and where it came from.
struct MethodSummary {
  std::string name;
  std::string input;   // the input as given
  std::string source;  // its name there (METHOD= renames it)
};

// What `-o OUTPUT` is, decided once from its name (output_kind) and carried in the summary.
enum class OutputKind : uint8_t {
  package,    // NAME.ptn
  program,    // NAME.pte: one self-contained .pte program
  directory,  // anything else: a directory of shards and manifest.json
};

struct PackSummary {
  std::string output;
  OutputKind output_kind = OutputKind::directory;
  bool dry_run = false;
  ShardingOptions sharding;
  std::vector<MethodSummary> methods;
  std::vector<KeyRename> renames;  // empty unless PackOptions::list_renames
  uint64_t renamed_keys = 0;       // listed or not
  std::vector<std::string> state;
  std::map<std::string, std::string> aliases;  // alias -> owner
  uint64_t tensor_count = 0;                   // keys with data
  uint64_t stored_tensor_count = 0;            // stored contents
  uint64_t referenced_bytes = 0;               // sum of every key's bytes
  uint64_t stored_bytes = 0;                   // unique bytes stored
  uint64_t dropped_keys = 0;
  uint64_t dropped_bytes = 0;
  std::vector<ShardSummary> shards;
  uint64_t output_bytes = 0;             // total bytes written (or planned)
  // The inputs' files, each once: every program, graph and data file read, and
  // every file of a packed directory given as an input (--base's aside).
  uint64_t input_bytes = 0;
  bool written_while_hashing = false;    // written on the plan the digests confirmed
  double elapsed_seconds = 0;            // wall time of the whole pack call
  std::vector<ProgramSummary> programs;  // .pte inputs
  std::vector<std::string> notes;        // advice that is not an error
  std::optional<BaseSummary> base;       // --base
};

// Runs the whole command. Nothing is written on error or in a dry run;
// an existing output is replaced atomically at the very end.
[[nodiscard]] PackSummary pack(const PackOptions& options);

// The summary pack prints: a few lines; `verbose` lists every rename, state key and shard.
// `width` > 0: lines longer than it are wrapped at word ends (a terminal's columns).
[[nodiscard]] std::string render_pack_text(const PackSummary& summary, bool verbose = false,
                                           size_t width = 0);
[[nodiscard]] std::string render_pack_json(const PackSummary& summary);

// SIZE for --max-shard-bytes: bytes, or K/M/G (10^3..) and KiB/MiB/GiB (2^10..).
[[nodiscard]] uint64_t parse_size(const std::string& text);
// The output kind, told by extension in any case (x.PTN is a package too).
[[nodiscard]] OutputKind output_kind(const std::filesystem::path& output);
// ".ptn package", ".pte program" or "directory", for messages.
[[nodiscard]] std::string_view output_kind_name(OutputKind kind);

}  // namespace ptepack
