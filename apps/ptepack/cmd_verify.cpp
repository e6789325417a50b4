// `ptepack verify`: check an artifact; exit 0 only when it is whole.
#include <iostream>

#include "commands.h"
#include "ptepack/base/error.h"
#include "ptepack/verify/verify.h"

namespace ptepack::cli {

Action add_verify(CLI::App& app) {
  struct Args {
    std::string path;
    bool json = false;
    VerifyOptions options;
    std::string signature;
    uint64_t newer_than = 0;
    uint64_t min_release = 0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd =
      app.add_subcommand("verify", "Re-read an artifact and check everything pack guarantees");
  cmd->add_option("path", args->path,
                  ".ptn, directory or manifest.json (other artifacts: reader checks); a program as "
                  "PATH@DATA[,DATA...] with the data files it loads with")
      ->required()
      ->default_str("");
  cmd->add_flag("--json", args->json, "Machine-readable report");
  cmd->add_option("-j,--jobs", args->options.jobs, "Hashing threads (default: all cores)");
  cmd->add_flag("--strict", args->options.strict,
                "Count notes (what ptepack would write differently) as problems");
  cmd->add_flag("--tensors", args->options.tensors,
                "A packed directory: also hash each tensor against its recorded SHA-256 (by "
                "default each file is hashed once and its digest proves its tensors)");
  cmd->add_option("--public-key", args->options.public_keys,
                  "PUB.pem: check a packed directory's signature (repeatable: any of the keys)")
      ->type_name("PUB.pem")
      ->default_str("");
  cmd->add_option("--program", args->options.programs,
                  "NAME: check only this program of a directory of programs and the files it "
                  "loads; files only other programs load may be missing (repeatable)")
      ->type_name("NAME")
      ->default_str("");
  cmd->add_option("--signature", args->signature,
                  "The signature bundle, when not DIR/model.sig (needs --public-key)");
  auto* newer = cmd->add_option("--newer-than", args->newer_than,
                                "N: the release number must be greater (needs --public-key)")
                    ->default_str("");
  auto* minimum = cmd->add_option("--min-release", args->min_release,
                                  "N: the release number must be at least N (needs --public-key)")
                     ->default_str("");
  auto progress_value = add_progress_option(*cmd);
  return [args, progress_value, newer, minimum] {
    if (!args->signature.empty()) args->options.signature = args->signature;
    if (newer->count() > 0) args->options.newer_than = args->newer_than;
    if (minimum->count() > 0) args->options.min_release = args->min_release;
    Progress progress;
    args->options.progress = &progress;
    progress.start(progress_mode(*progress_value));
    auto spec = parse_artifact_spec(args->path);
    args->options.data = spec.data;
    auto report = verify_artifact(spec.path, args->options);
    progress.stop();
    if (args->json) {
      print(render_verify_json(report));
    } else {
      print(render_verify_text(report));
      for (const auto& problem : report.problems)
        std::cerr << "ptepack: error: " << escaped(problem.text) << '\n';
      for (const auto& note : report.notes)
        std::cerr << (report.strict ? "ptepack: error: " : "ptepack: note: ") << escaped(note)
                  << '\n';
    }
    return report.ok() ? 0 : static_cast<int>(ErrorCode::verify_failed);
  };
}

}  // namespace ptepack::cli
