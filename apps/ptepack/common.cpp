// Options and helpers every subcommand shares.
#include <unistd.h>

#include <cstdio>

#include "commands.h"
#include "ptepack/base/error.h"
#include "ptepack/io/progress.h"

namespace ptepack::cli {

std::shared_ptr<std::string> add_progress_option(CLI::App& cmd) {
  auto value = std::make_shared<std::string>("auto");
  cmd.add_option("--progress", *value,
                 "auto: a progress line on a terminal; always: also plain lines every 5 s "
                 "when stderr is not one (CI logs); never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  return value;
}

ProgressMode progress_mode(const std::string& value) {
  return value == "always"  ? ProgressMode::always
         : value == "never" ? ProgressMode::never
                            : ProgressMode::automatic;
}

void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

size_t stdout_width() {
  return ::isatty(STDOUT_FILENO) != 0 ? terminal_columns(STDOUT_FILENO) : 0;
}

}  // namespace ptepack::cli
