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
    std::string method;
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
  auto* method_option = cmd->add_option(
      "--method", args->method,
      "M or M=N: compare only method M of A with method M (or N) of B (.pte programs)");
  return [args, method_option] {
    auto a = parse_artifact_spec(args->a);
    auto b = parse_artifact_spec(args->b);
    std::optional<MethodPair> method;
    if (method_option->count() > 0) {
      const auto eq = args->method.find('=');
      method = MethodPair{args->method.substr(0, eq),
                          eq == std::string::npos ? args->method : args->method.substr(eq + 1)};
      if (method->a.empty() || method->b.empty()) {
        fail(ErrorCode::usage, "--method {}: expected M or M=N", quote(args->method));
      }
    }
    auto diff = diff_artifacts({a.path, a.data}, {b.path, b.data}, args->jobs, method);
    print(args->json ? render_diff_json(diff) : render_diff_text(diff));
    return diff.equivalent() ? 0 : 1;
  };
}

}  // namespace ptepack::cli
