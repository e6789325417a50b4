// The subcommands' registration functions; each lives in its own cmd_*.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace ptepack::cli {

// Registers a subcommand on `app` and returns the action that runs it after
// parsing; the action returns the process exit code.
using Action = std::function<int()>;
Action add_pack(CLI::App& app);
Action add_dump(CLI::App& app);
Action add_verify(CLI::App& app);
Action add_diff(CLI::App& app);

// Prints to stdout and flushes.
void print(const std::string& text);

}  // namespace ptepack::cli
