// manifest.json of a packed output directory: the model, its JSON form, and a strict reader.
#pragma once

#include <cstdint>
#include <map>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptepack/hash/sha256.h"
#include "ptepack/io/input_file.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack {

// The shards' file format and what the cap bounds, as a manifest records them
// ("ptd"/"safetensors", "file"/"payload"), converted once by the reader.
enum class ShardFormat { ptd, safetensors };
enum class CapMode { file, payload };
[[nodiscard]] std::string_view shard_format_name(ShardFormat format);
[[nodiscard]] std::string_view cap_mode_name(CapMode mode);
// The size the cap bounds in `mode`: the whole file, or its unique tensor bytes.
[[nodiscard]] constexpr uint64_t cap_measure(CapMode mode, uint64_t file_bytes,
                                             uint64_t payload_bytes) {
  return mode == CapMode::file ? file_bytes : payload_bytes;
}

struct ManifestProgram {
  std::string file;
  std::string sha256;
  uint64_t size = 0;
};

// Version 2: one .pte program of a directory of programs.
struct ManifestProgramEntry {
  std::string file;
  std::string sha256;
  uint64_t size = 0;
  std::vector<std::string> methods;     // execution plan names, in order
  std::vector<std::string> shards;      // the shard files it needs, in the order to load them
  std::vector<std::string> named_data;  // keys it reads as named data, in program order
};

struct ManifestShard {
  std::string file;
  std::string sha256;
  uint64_t size = 0;
  uint64_t payload_bytes = 0;
  std::vector<std::string> keys;  // sorted; every key of this release the file serves
  // Keys the file holds that this release does not read (a shard kept whole
  // from an earlier release by pack --base), sorted; written only when any.
  std::vector<std::string> stale = {};
  // Directory of two or more programs: the programs that list this shard, in
  // manifest order (its sharing set); written only then, empty otherwise.
  std::vector<std::string> programs = {};
};

struct ManifestTensor {
  std::string shard;
  Digest sha256{};  // written and read as 64 lowercase hex digits
  uint64_t nbytes = 0;
  DType dtype = DType::BYTE;
  Shape shape;
  bool is_mutable = false;
  std::optional<std::string> alias_of;
  std::vector<uint8_t> dim_order = {};  // version 2: recorded when not the identity
  bool opaque = false;                  // version 2: stored without a tensor layout
};

struct Manifest {
  int version = 1;                             // 1: program graph; 2: .pte programs
  ManifestProgram program;                     // version 1
  std::vector<ManifestProgramEntry> programs;  // version 2
  ShardFormat shard_format = ShardFormat::ptd;
  std::optional<uint64_t> max_shard_bytes;  // null when uncapped
  CapMode cap_mode = CapMode::file;
  // "oversize": "own-shard": a shard may exceed the cap when it holds one stored tensor.
  bool oversize_own_shard = false;
  // Shard options written only when not the default, so a repack of this
  // directory alone can take them (docs/manifest.md): .ptd segment alignment
  // (default 128), shard file prefix ("weights"), placement single (version 2;
  // the default, sets, is not written) and stored tensors per shard.
  std::optional<uint64_t> alignment;
  std::optional<std::string> shard_prefix;
  bool placement_single = false;
  std::optional<uint64_t> max_shard_tensors;
  std::vector<ManifestShard> shards;
  std::map<std::string, ManifestTensor> tensors;
  std::vector<std::string> state;  // every state key, with or without data
  uint64_t total_size = 0;         // metadata.total_size
  // pack --release N (1 to 2^53-1): the release number a signature covers and
  // a device compares against rollback; with --base, the previous release's
  // manifest.json SHA-256 (64 hex digits). Written only when set.
  std::optional<uint64_t> release;
  std::optional<std::string> base_manifest_sha256;
  // The file's weight_map is derived data (weight_map_of): the reader checks
  // it and keeps nothing of it.
};

// One entry of a shard's key list.
struct ShardKey {
  std::string_view key;
  uint32_t shard = 0;     // index into Manifest::shards
  uint32_t position = 0;  // index into that shard's keys
};
// Every shard's keys in one list sorted by key; a key several shards list
// comes once per shard, in shard order. Views into m.shards.
[[nodiscard]] std::vector<ShardKey> sorted_shard_keys(const Manifest& m);

// key -> file of the first shard listing it, sorted by key: the manifest's
// weight_map and the safetensors index's. Views into m.shards.
using WeightMap = std::vector<std::pair<std::string_view, std::string_view>>;
[[nodiscard]] WeightMap weight_map_of(const Manifest& m);
// The same from sorted_shard_keys(m), when it is at hand.
[[nodiscard]] WeightMap weight_map_of(const Manifest& m, const std::vector<ShardKey>& sorted);

inline constexpr std::string_view kManifestFormat = "ptepack.manifest";
inline constexpr int kManifestVersion = 1;          // program-graph directories
inline constexpr int kManifestProgramsVersion = 2;  // directories of .pte programs
inline constexpr uint64_t kMaxRelease = (uint64_t{1} << 53) - 1;  // exact in every JSON reader

// Stable JSON text: fields in schema order, maps sorted, 2-space indent, final newline.
[[nodiscard]] std::string manifest_to_json(const Manifest& manifest);
// The same text handed to `sink` in order, in pieces of about 1 MiB: a
// 100,000-tensor manifest is written without ever being one string.
// With `tensors`, the "tensors" entries are the ones it hands over (in key
// order, one at a time) instead of manifest.tensors: a writer need not hold
// them all in a map.
using ManifestTensorVisitor = std::function<void(const std::string& key, const ManifestTensor&)>;
using ManifestTensorSource = std::function<void(const ManifestTensorVisitor&)>;
void write_manifest_json(const Manifest& manifest,
                         const std::function<void(std::string_view)>& sink,
                         const ManifestTensorSource* tensors = nullptr);
// Strict reader: every field present with the right type, file names plain
// (no '/', '\\', '..', leading '.', or empty). Errors: invalid_input "<context>: ...".
[[nodiscard]] Manifest parse_manifest(std::string_view text, const std::string& context);
// A manifest.json file, refused before it is read when above
// Limits::max_manifest_bytes, then parsed (its text freed once parsed).
[[nodiscard]] Manifest read_manifest_file(const InputFile& file, const std::string& context);
// Why `prefix` cannot start shard file names (letters, digits, '.', '_', '-', not
// starting with '.', at most 100 characters), or empty when it can: the rule of
// --shard-prefix and of a manifest's recorded shard_prefix.
[[nodiscard]] std::string shard_prefix_problem(std::string_view prefix);
// The same for --alignment and a recorded alignment: a power of two, 16 to
// Limits::max_alignment.
[[nodiscard]] std::string alignment_problem(uint64_t alignment);

// The "version" of the manifest at `path` when it is a regular file within
// Limits::max_manifest_bytes holding JSON with one; nothing otherwise (the
// reader that opens it says why). How a front end tells the two kinds apart.
[[nodiscard]] std::optional<uint64_t> manifest_version_of(const std::filesystem::path& path);
// The version of the manifest at `path` when it names ptepack's format ("format":
// kManifestFormat); nullopt for any other file (another tool's manifest.json, not JSON).
[[nodiscard]] std::optional<uint64_t> ptepack_manifest_version_of(
    const std::filesystem::path& path);

// The lines every command prints for a file that is not the one its manifest records
// (verify's file_changed; docs/problems.md), worded once: its size, then its SHA-256.
[[nodiscard]] std::string size_differs_line(const std::string& file, uint64_t size,
                                            uint64_t recorded);
[[nodiscard]] std::string digest_differs_line(const std::string& file);
// The top-level `version` of a manifest's text, parsed as JSON (any layout: re-indented or
// minified by another tool), or nullopt when the text is no JSON object with an unsigned
// integer `version`. Decides which front end reads a packed directory.
[[nodiscard]] std::optional<uint64_t> manifest_version(std::string_view text);
// True when `name` is a plain file name safe to join to the output directory.
[[nodiscard]] bool is_plain_file_name(std::string_view name);

}  // namespace ptepack
