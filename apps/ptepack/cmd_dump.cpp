// `ptepack dump`: render what an artifact holds.
#include <cstdio>

#include "commands.h"
#include "ptepack/dump/dump.h"

namespace ptepack::cli {

Action add_dump(CLI::App& app) {
  struct Args {
    std::string path;
    DumpOptions options;
  };
  auto args = std::make_shared<Args>();
  auto* cmd =
      app.add_subcommand("dump", "Show methods, keys, state, shards and dedup of an artifact");
  cmd->add_option("path", args->path,
                  ".ptn, directory, manifest.json, .ptg, .json, .ptd or .safetensors")
      ->required();
  cmd->add_flag("--json", args->options.json, "Stable machine-readable output");
  cmd->add_flag("--graph", args->options.graph,
                "Also print every node of every method and subgraph");
  cmd->add_option("-j,--jobs", args->options.jobs, "Hashing threads (default: all cores)");
  return [args] {
    dump_artifact(args->path, args->options, [](std::string_view chunk) {
      std::fwrite(chunk.data(), 1, chunk.size(), stdout);
    });
    std::fflush(stdout);
    return 0;
  };
}

}  // namespace ptepack::cli
