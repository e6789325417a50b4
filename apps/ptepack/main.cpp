// ptepack CLI: parse, run one library call, map errors to exit codes in one place.
#include <cstdio>
#include <iostream>
#include <new>
#include <sstream>

#include "commands.h"
#include "ptepack/base/error.h"
#include "ptepack/io/output_file.h"

namespace {

int report(const std::string& message, int code) {
  ptepack::wait_if_interrupted();
  std::istringstream lines(message);
  std::string line;
  while (std::getline(lines, line)) std::cerr << "ptepack: error: " << line << '\n';
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  ptepack::install_interrupt_cleanup();
  CLI::App app{"ptepack: pack, inspect and verify multi-method model artifacts"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ptepack 0.1.0");
  auto pack = ptepack::cli::add_pack(app);
  auto dump = ptepack::cli::add_dump(app);
  auto verify = ptepack::cli::add_verify(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    return report(std::string(e.what()) + "\nrun 'ptepack --help' for usage",
                  static_cast<int>(ptepack::ErrorCode::usage));
  }
  try {
    int code = app.got_subcommand("pack") ? pack() : app.got_subcommand("dump") ? dump() : verify();
    ptepack::wait_if_interrupted();
    return code;
  } catch (const ptepack::Error& e) {
    return report(e.what(), static_cast<int>(e.code()));
  } catch (const std::bad_alloc&) {
    return report("out of memory", static_cast<int>(ptepack::ErrorCode::internal));
  } catch (const std::exception& e) {
    return report(std::string("internal error: ") + e.what(),
                  static_cast<int>(ptepack::ErrorCode::internal));
  }
}
