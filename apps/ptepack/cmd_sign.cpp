// `ptepack sign`: sign a packed directory (OpenSSF Model Signing); write DIR/model.sig.
#include "commands.h"
#include "ptepack/sign/sign.h"

namespace ptepack::cli {

void add_key_password_options(CLI::App& cmd, KeyPassword& password) {
  cmd.add_option_function<std::string>(
      "--key-password-file", [&password](const std::string& f) { password.file = f; },
      "FILE whose first line is the passphrase of an encrypted private key");
  cmd.add_option_function<std::string>(
      "--key-password-env", [&password](const std::string& v) { password.environment = v; },
      "NAME of an environment variable holding the passphrase (never the passphrase itself)");
}

Action add_sign(CLI::App& app) {
  struct Args {
    SignOptions options;
    std::string directory;
    std::string key;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "sign", "Sign a packed directory in the OpenSSF Model Signing format (DIR/model.sig)");
  cmd->add_option("directory", args->directory, "A packed directory (or its manifest.json)")
      ->required()
      ->default_str("");
  cmd->add_option("--private-key", args->key,
                  "KEY.pem: an EC private key on P-256, P-384 or P-521 (PEM or PKCS#8)")
      ->required()
      ->default_str("");
  add_key_password_options(*cmd, args->options.password);
  cmd->add_option("-j,--jobs", args->options.jobs, "Hashing threads (default: all cores)");
  cmd->add_flag("--json", args->json, "Machine-readable report");
  return [args] {
    args->options.directory = args->directory;
    args->options.private_key = args->key;
    auto report = sign_directory(args->options);
    print(args->json ? render_sign_json(report) : render_sign_text(report));
    return 0;
  };
}

}  // namespace ptepack::cli
