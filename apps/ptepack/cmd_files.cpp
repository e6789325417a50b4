// `ptepack files`: what a device that runs some programs of a release downloads.
#include "commands.h"
#include "ptepack/verify/verify.h"

namespace ptepack::cli {

Action add_files(CLI::App& app) {
  struct Args {
    std::string dir;
    std::vector<std::string> programs;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "files", "List the files a device needs to run programs of a packed directory");
  cmd->add_option("dir", args->dir, "A directory of programs (pack of .pte programs)")
      ->required()
      ->default_str("");
  cmd->add_option("--program", args->programs,
                  "NAME: a program the device runs (repeatable; default: every program)")
      ->type_name("NAME")
      ->default_str("");
  cmd->add_flag("--json", args->json, "Machine-readable list with sizes and SHA-256 digests");
  return [args] {
    const auto files = device_files(args->dir, args->programs);
    print(args->json ? render_files_json(files) : render_files_text(files));
    return 0;
  };
}

}  // namespace ptepack::cli
