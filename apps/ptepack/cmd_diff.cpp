// `ptepack diff`: compare two artifacts by content; exit 0 when equivalent, 1 when they differ.
#include "commands.h"
#include "ptepack/base/error.h"
#include "ptepack/diff/diff.h"

namespace ptepack::cli {

Action add_diff(CLI::App& app) {
  struct Args {
    std::string a;
    std::string b;
    bool json = false;
    unsigned jobs = 0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "diff", "Compare two artifacts by what a runtime computes with; exit 0 when nothing differs");
  cmd->add_option("a", args->a, "The artifact before: PATH[@DATA[,DATA...]] (any kind dump reads)")
      ->required()
      ->default_str("");
  cmd->add_option("b", args->b, "The artifact after: PATH[@DATA[,DATA...]]")
      ->required()
      ->default_str("");
  cmd->add_flag("--json", args->json, "Machine-readable report (format ptepack.diff)");
  cmd->add_option("-j,--jobs", args->jobs, "Hashing threads (default: all cores)");
  return [args] {
    auto a = parse_artifact_spec(args->a);
    auto b = parse_artifact_spec(args->b);
    auto diff = diff_artifacts({a.path, a.data}, {b.path, b.data}, args->jobs);
    print(args->json ? render_diff_json(diff) : render_diff_text(diff));
    return diff.equivalent() ? 0 : 1;
  };
}

}  // namespace ptepack::cli
