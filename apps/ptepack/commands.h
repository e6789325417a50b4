// The subcommands' registration functions; each lives in its own cmd_*.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "ptepack/io/progress.h"
#include "ptepack/pack/pack.h"
#include "ptepack/trust/signature.h"

namespace ptepack::cli {

// Registers a subcommand on `app` and returns the action that runs it after
// parsing; the action returns the process exit code.
using Action = std::function<int()>;
Action add_pack(CLI::App& app);
Action add_dump(CLI::App& app);
Action add_verify(CLI::App& app);
Action add_diff(CLI::App& app);
Action add_sign(CLI::App& app);
Action add_files(CLI::App& app);

// --key-password-file and --key-password-env, filling `password` (pack --sign, sign).
void add_key_password_options(CLI::App& cmd, KeyPassword& password);

// Registers --progress auto|always|never on `cmd`; the returned string is set by parsing.
std::shared_ptr<std::string> add_progress_option(CLI::App& cmd);
// The mode a --progress value names.
ProgressMode progress_mode(const std::string& value);

// Prints to stdout and flushes.
void print(const std::string& text);
// Columns of the terminal on stdout, or 0 (print whole lines) when stdout is not one.
size_t stdout_width();

}  // namespace ptepack::cli
