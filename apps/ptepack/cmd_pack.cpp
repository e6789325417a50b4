// `ptepack pack`: options -> PackOptions -> ptepack::pack -> summary.
#include <algorithm>
#include <cctype>

#include "commands.h"
#include "ptepack/pack/pack.h"

namespace ptepack::cli {
namespace {

// What parsing fills: PackOptions directly, and the strings turned into it after.
struct PackArgs {
  PackOptions options;
  std::vector<std::string> inputs;
  std::string max_shard_bytes;
  std::string cap_mode = "file";
  std::string shard_format = "ptd";
  std::string oversize = "error";
  std::string placement = "sets";
  std::string base;
  std::string merge;
  std::string sign;
  uint64_t release = 0;
  uint64_t constant_alignment = 0;
  size_t max_shard_tensors = 0;
  bool json = false;
  bool quiet = false;
  bool verbose = false;
};

void add_input_options(CLI::App& cmd, PackArgs& args) {
  cmd.add_option("inputs", args.inputs,
                 "[METHOD=]PATH[@DATA[,DATA...]] (.json, .ptg, .ptn, .pte, directory)")
      ->required()
      ->default_str("");
  cmd.add_option("-o,--output", args.options.output,
                 "NAME.ptn for a package, NAME.pte for one program, anything else for a "
                 "directory (missing parents are created)")
      ->required()
      ->default_str("");
  cmd.add_option("-j,--jobs", args.options.jobs,
                 "Threads for reading inputs, hashing and writing (default: all cores)");
}

// The words a shard option takes, from the library's table of them.
CLI::IsMember words_of(std::string_view flag) {
  for (const auto& option : shard_options()) {
    if (option.flag == flag) {
      return CLI::IsMember(std::vector<std::string>(option.words.begin(), option.words.end()));
    }
  }
  throw std::logic_error("not a shard option");
}

// How bytes are laid out in shards, and the release they build on.
void add_shard_options(CLI::App& cmd, PackArgs& args) {
  cmd.add_option("--max-shard-bytes", args.max_shard_bytes,
                 "Cap per shard, e.g. 256MiB, 1.5GB, '64 kb' (K/M/G/T: powers of 1000, "
                 "KiB/MiB/GiB/TiB: powers of 1024; none: no cap; default: no cap, or the "
                 "cap recorded by a lone packed directory input)");
  cmd.add_option("--cap-mode", args.cap_mode, "What the cap bounds: file (whole file) or payload")
      ->check(words_of("--cap-mode"));
  cmd.add_option("--shard-format", args.shard_format, "Shard format: ptd or safetensors")
      ->check(words_of("--shard-format"));
  cmd.add_option("--oversize", args.oversize,
                 "A tensor larger than the cap: error, or own-shard (alone in a shard allowed "
                 "to exceed the cap)")
      ->check(words_of("--oversize"));
  cmd.add_option("--max-shard-tensors", args.max_shard_tensors,
                 "At most N stored tensors per shard (aliases not counted; 0: no limit)");
  cmd.add_option("--placement", args.placement,
                 "Two or more .pte programs: sets (shards never mix what different sets of "
                 "programs use; each loads only its own bytes) or single (one first-fit over "
                 "everything, for runtimes that take one data file)")
      ->check(words_of("--placement"));
  cmd.add_option("--shard-prefix", args.options.shard_prefix, "Shard file name prefix");
  cmd.add_option("--base", args.base,
                 "OLD: the previous release (a packed directory or its manifest.json); its "
                 "shards are kept whole where still valid, so a device holding OLD downloads "
                 "only what changed");
  cmd.add_option("--alignment", args.options.sharding.alignment,
                 ".ptd segment alignment (a power of two from 16 to 65536)");
}

// .pte programs merged or trimmed, and the release's number and signature.
void add_program_options(CLI::App& cmd, PackArgs& args) {
  cmd.add_option("--merge", args.merge,
                 "NAME.pte: .pte inputs become one multi-method program, DIR/NAME.pte, beside "
                 "its shards (with -o NAME.pte they always do)");
  cmd.add_option("--method", args.options.methods,
                 "M: keep only method M of .pte inputs (repeatable), with the data it uses")
      ->type_name("M")
      ->default_str("");
  cmd.add_flag("--share-state", args.options.share_state,
               "With a merge: mutable buffers of one name become one state every method sees "
               "(load all methods, then run; Module(..., share_memory_arenas=true))");
  cmd.add_option("--release", args.release,
                 "N: the release number the manifest records (1 to 2^53-1; greater than "
                 "--base's), which a signature covers and devices check against rollback")
      ->default_str("");
  cmd.add_option("--sign", args.sign,
                 "KEY.pem: sign the release (DIR/model.sig, OpenSSF Model Signing) before it "
                 "is committed");
  cmd.add_option("--constant-alignment", args.constant_alignment,
                 "N: align every constant in a .pte output's constant segment to N bytes (a "
                 "power of two from 16 to 65536; default: the largest alignment the inputs' "
                 "exporters used, read from the padding between their constants)")
      ->default_str("");
  add_key_password_options(cmd, args.options.sign_password);
}

// The parsed strings turned into args.options.
void finish_options(PackArgs& args, const CLI::App& cmd, const std::string& progress) {
  auto& o = args.options;
  for (const auto& input : args.inputs) o.inputs.push_back(parse_input_spec(input));
  auto cap = args.max_shard_bytes;
  std::transform(cap.begin(), cap.end(), cap.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!cap.empty() && cap != "none") o.sharding.max_shard_bytes = parse_size(args.max_shard_bytes);
  auto given = [&cmd](std::string_view name) {
    return cmd.get_option(std::string(name))->count() > 0;
  };
  o.given = GivenShardOptions{};
  for (const auto& option : shard_options()) (*o.given).*option.given = given(option.flag);
  o.sharding.cap_mode = args.cap_mode == "payload" ? CapMode::payload : CapMode::file;
  o.sharding.oversize_own_shard = args.oversize == "own-shard";
  o.placement = args.placement == "single" ? Placement::single : Placement::sets;
  if (given("--base")) o.base = args.base;     // an empty one is refused by pack
  if (given("--merge")) o.merge = args.merge;  // checked by pack
  if (given("--sign")) o.sign_key = args.sign;
  if (given("--release")) o.release = args.release;
  if (given("--constant-alignment")) o.constant_alignment = args.constant_alignment;
  if (args.max_shard_tensors > 0) o.sharding.max_shard_tensors = args.max_shard_tensors;
  o.sharding.format =
      args.shard_format == "safetensors" ? ShardFormat::safetensors : ShardFormat::ptd;
  o.progress = args.quiet ? ProgressMode::never : progress_mode(progress);
  o.list_renames = args.json || (args.verbose && !args.quiet);
}

}  // namespace

Action add_pack(CLI::App& app) {
  auto args = std::make_shared<PackArgs>();
  auto* cmd =
      app.add_subcommand("pack", "Merge program graphs and their weights into one artifact");
  add_input_options(*cmd, *args);
  add_shard_options(*cmd, *args);
  add_program_options(*cmd, *args);
  cmd->add_flag("--dry-run", args->options.dry_run, "Print the plan and write nothing");
  cmd->add_flag("--json", args->json, "Print a machine-readable summary");
  cmd->add_flag("-q,--quiet", args->quiet, "No progress and no summary text");
  auto progress = add_progress_option(*cmd);
  cmd->add_flag("-v,--verbose", args->verbose,
                "List every rename, state key and shard in the summary");
  cmd->add_flag("--force", args->options.force, "Replace an existing non-ptepack directory");
  return [args, cmd, progress] {
    finish_options(*args, *cmd, *progress);
    auto summary = pack(args->options);
    if (args->json) {
      print(render_pack_json(summary));
    } else if (!args->quiet) {
      print(render_pack_text(summary, args->verbose, stdout_width()));
    }
    return 0;
  };
}

}  // namespace ptepack::cli
