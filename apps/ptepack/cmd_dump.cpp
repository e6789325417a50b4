// `ptepack dump`: render what an artifact holds.
#include <unistd.h>

#include <cstdio>

#include "commands.h"
#include "ptepack/base/error.h"
#include "ptepack/dump/dump.h"
#include "ptepack/io/progress.h"

namespace ptepack::cli {

Action add_dump(CLI::App& app) {
  struct Args {
    std::string path;
    DumpOptions options;
    std::string sort = "key";
    long width = -1;
    std::string graph;  // "", "text" or "dot"
  };
  auto args = std::make_shared<Args>();
  auto* cmd =
      app.add_subcommand("dump", "Show methods, keys, state, shards and dedup of an artifact");
  cmd->add_option(
         "path", args->path,
         ".ptn, directory, manifest.json, .ptg, .json, .pte, .ptd or .safetensors; a program "
         "as PATH@DATA[,DATA...] with its data files")
      ->required()
      ->default_str("");
  cmd->add_flag("--json", args->options.json, "Stable machine-readable output");
  cmd->add_flag("--graph{text}", args->graph,
                "--graph (or --graph=text): also print every node of every method and subgraph; "
                "--graph=dot (or --graph dot): print only the methods as a Graphviz digraph "
                "(dot -Tsvg)")
      ->check(CLI::IsMember({"text", "dot"}));
  cmd->add_option("-j,--jobs", args->options.jobs, "Hashing threads (default: all cores)");
  cmd->add_option("--key", args->options.keys,
                  "List only keys matching this shell glob (repeatable, e.g. 'decode/*')")
      ->default_str("");
  cmd->add_option("--method", args->options.method, "List only the keys this method uses")
      ->default_str("");
  cmd->add_option("--shard", args->options.shard, "List only the keys stored in this shard file")
      ->default_str("");
  cmd->add_option("--sort", args->sort, "Order of the tensor list: key, size or natural")
      ->check(CLI::IsMember({"key", "size", "natural"}));
  cmd->add_flag("--summary", args->options.summary,
                "Counts and bytes per method, dtype and shard, and the largest tensors, instead "
                "of the tensor list");
  cmd->add_option("--top", args->options.top, "How many of the largest tensors --summary shows");
  cmd->add_flag("--no-tensors", args->options.no_tensors, "Leave out the per-tensor list");
  cmd->add_flag("--offsets", args->options.offsets, "Show each tensor's file and byte offset");
  cmd->add_flag("--no-hash", args->options.no_hash,
                "Do not hash tensors that have no recorded digest (sha256 shown as -)");
  auto* width = cmd->add_option("--width", args->width,
                  "Text columns to fit (default: the terminal's; whole lines when not a "
                  "terminal; 0: whole)")
      ->type_name("N")
      ->default_str("");
  auto progress = add_progress_option(*cmd);
  return [args, progress, width] {
    auto& o = args->options;
    o.sort = args->sort == "size"      ? DumpSort::size
             : args->sort == "natural" ? DumpSort::natural
                                       : DumpSort::key;
    if (width->count() > 0 && args->width < 0) {
      fail(ErrorCode::usage, "dump: --width {}: give a number of columns (0: whole lines)",
           args->width);
    }
    o.width = args->width >= 0 ? static_cast<size_t>(args->width) : stdout_width();
    o.progress = progress_mode(*progress);
    o.graph = args->graph == "text";
    o.graph_dot = args->graph == "dot";
    if (o.graph_dot && o.json) {
      fail(ErrorCode::usage,
           "--graph=dot prints a Graphviz digraph; it does not combine with --json");
    }
    auto spec = parse_artifact_spec(args->path);
    o.data = spec.data;
    dump_artifact(spec.path, o, [](std::string_view chunk) {
      std::fwrite(chunk.data(), 1, chunk.size(), stdout);
    });
    std::fflush(stdout);
    return 0;
  };
}

}  // namespace ptepack::cli
