// ptepack CLI: parse, run one library call, map errors to exit codes in one place.
#include <malloc.h>
#if PTEPACK_MIMALLOC
#include <mimalloc.h>
#endif

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <new>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "ptepack/base/error.h"
#include "ptepack/base/memory_return.h"
#include "ptepack/containers/manifest.h"
#include "ptepack/io/output_file.h"
#include "ptepack/verify/verify.h"

namespace {

// `--json` on the command line: a failure is also one JSON document on stdout.
bool json_wanted = false;

// {"error": {"code", "problem", "message", "path"}} (schema/error.schema.json): the
// message's first line; the path it starts with ("<file>: ..."), when it starts with one.
void report_json(const std::string& message, int code, std::optional<ptepack::ProblemId> problem) {
  const std::string first = message.substr(0, message.find('\n'));
  const auto colon = first.find(": ");
  nlohmann::ordered_json path = nullptr;
  const std::string prefix = colon == std::string::npos ? std::string() : first.substr(0, colon);
  // A file names itself with a '/' or an extension; "pack: ..." names a command.
  if (!prefix.empty() && prefix[0] != '-' && prefix.find(' ') == std::string::npos &&
      prefix.find_first_of("/.") != std::string::npos) {
    path = prefix;
  }
  nlohmann::ordered_json doc{
      {"error",
       {{"code", code},
        {"problem", problem ? nlohmann::ordered_json(ptepack::problem_id_name(*problem))
                            : nlohmann::ordered_json(nullptr)},
        {"message", ptepack::escaped(first)},
        {"path", path}}}};
  std::cout << doc.dump(2) << '\n' << std::flush;
}

// A failure: one line on stderr per line of `message`, and with --json the error document
// (`problem`: the identifier of the damage a strict reader found, docs/problems.md).
int report(const std::string& message, int code,
           std::optional<ptepack::ProblemId> problem = std::nullopt) {
  ptepack::wait_if_interrupted();
  std::istringstream lines(message);
  std::string line;
  // Names inside messages come from input files: escaped, whatever raised them.
  while (std::getline(lines, line))
    std::cerr << "ptepack: error: " << ptepack::escaped(line) << '\n';
  if (json_wanted) report_json(message, code, problem);
  return code;
}

std::string version_text() {
  return fmt::format(
      "ptepack {}\n"
      "writes: manifest.json {} version {} (program graphs) and {} (.pte programs); "
      ".ptd FlatTensor FT01 version 0; .ptg NPTG; .pte ExecuTorch ET12; .ptn stored ZIP",
      PTEPACK_VERSION, ptepack::kManifestFormat, ptepack::kManifestVersion,
      ptepack::kManifestProgramsVersion);
}

// Levenshtein distance, for did-you-mean hints.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known name nearest to `word`, when it is near enough to be a typo.
std::string nearest(std::string_view word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& name : names) {
    size_t distance = edit_distance(word, name);
    bool prefix =
        name.size() > word.size() && name.compare(0, word.size(), word) == 0 && word.size() >= 3;
    if (prefix) distance = std::min<size_t>(distance, 1);
    if (distance < best_distance) {
      best_distance = distance;
      best = name;
    }
  }
  return best;
}

const CLI::App* find_subcommand(const CLI::App& app, std::string_view name) {
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::vector<std::string> long_options(const CLI::App& app) {
  std::vector<std::string> names;
  for (const auto* option : app.get_options()) {
    for (const auto& name : option->get_lnames()) names.push_back("--" + name);
  }
  return names;
}

// A parse error, explained: an unknown command or option gets the nearest known one, and
// the hint names the help that applies.
// When `word` (--name or --name=value) is no long option of `app`: its name
// and the nearest known one (empty when none is near); nothing when it is known.
std::optional<std::pair<std::string, std::string>> unknown_option(const CLI::App& app,
                                                                  std::string_view word) {
  auto name = std::string(word.substr(0, word.find('=')));
  auto known = long_options(app);
  if (std::find(known.begin(), known.end(), name) != known.end()) return std::nullopt;
  auto guess = nearest(name, known);
  return std::pair{std::move(name), std::move(guess)};
}

std::string did_you_mean(const std::string& guess) {
  return guess.empty() ? "" : fmt::format("; did you mean '{}'?", guess);
}

// The parser's messages that read as its own, said in ptepack's words.
std::string in_our_words(const std::string& message) {
  static const std::string twice = ": At Most 1 required but received ";
  if (auto at = message.find(twice); at != std::string::npos) {
    return fmt::format("{} given {} times: give it once", message.substr(0, at),
                       message.substr(at + twice.size()));
  }
  return message;
}

std::string explain(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  const CLI::App* sub = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string_view word = argv[i];
    if (word.starts_with("--")) {  // before the command: ptepack's own options
      auto unknown = unknown_option(app, word);
      if (!unknown) continue;
      return fmt::format("unknown option '{}'{}\nrun 'ptepack --help' for usage", unknown->first,
                         did_you_mean(unknown->second));
    }
    if (word.starts_with('-')) continue;
    sub = find_subcommand(app, word);
    if (sub == nullptr) {
      auto guess = nearest(word, subcommand_names(app));
      return fmt::format("unknown command '{}'{}\nrun 'ptepack --help' for the commands", word,
                         did_you_mean(guess));
    }
    for (int k = i + 1; k < argc; ++k) {
      std::string_view option = argv[k];
      if (option == "--") break;
      if (!option.starts_with("--")) continue;
      auto unknown = unknown_option(*sub, option);
      if (!unknown) continue;
      return fmt::format("{}: unknown option '{}'{}\nrun 'ptepack {} --help' for its options",
                         sub->get_name(), unknown->first, did_you_mean(unknown->second),
                         sub->get_name());
    }
    break;
  }
  if (sub != nullptr) {
    return fmt::format("{}: {}\nrun 'ptepack {} --help' for its options", sub->get_name(),
                       in_our_words(error.what()), sub->get_name());
  }
  return fmt::format("{}\nrun 'ptepack --help' for usage", error.what());
}

// `dump --graph dot` means `dump --graph=dot` (and text alike): the flag's
// optional value, given as the next word, is joined to it.
std::vector<std::string> joined_graph_values(int argc, char** argv) {
  std::vector<std::string> words(argv, argv + argc);
  const auto command = std::find_if(words.begin() + 1, words.end(),
                                    [](const std::string& w) { return !w.starts_with('-'); });
  if (command == words.end() || *command != "dump") return words;
  for (auto it = command; it != words.end() && it + 1 != words.end(); ++it) {
    if (*it == "--") break;
    if (*it == "--graph" && (it[1] == "dot" || it[1] == "text")) {
      *it += "=" + it[1];
      words.erase(it + 1);
    }
  }
  return words;
}

// The allocator tuned for many small tensors (docs/performance.md).
void tune_allocator() {
#if PTEPACK_MIMALLOC
  // Linked in by CMake (PTEPACK_MIMALLOC): malloc is mimalloc's for the whole
  // process, 40-45% off `dump` and `verify` of a 100,000-tensor directory
  // against glibc's tuned below (docs/performance.md). The call keeps the link.
  (void)mi_version();
  // mimalloc returns freed pages after a delay, so that they can be reused;
  // where pack frees far more than it allocates (the validator's name sets on
  // worker threads; a program while it writes its encoding to fresh pages),
  // the delay is dropped, and what is still held is collected at the end:
  // 80 MiB less peak memory for a 100,000-tensor pack, at no measurable cost
  // (docs/performance.md). Elsewhere the delay stays: without it,
  // allocation-heavy steps cost up to 30% more time.
  static long decommit_delay = mi_option_get(mi_option_decommit_delay);
  ptepack::set_memory_return_hooks({[] { mi_option_set(mi_option_decommit_delay, 0); },
                                    [] {
                                      mi_collect(true);
                                      mi_option_set(mi_option_decommit_delay, decommit_delay);
                                    }});
#elif defined(__GLIBC__)
  // A many-tensor model allocates and frees millions of small objects. Without
  // fastbins nothing is consolidated later, and freed memory stays in the
  // process instead of being returned and faulted in again: 13% off `dump` of
  // a 100,000-tensor directory (docs/performance.md).
  mallopt(M_MXFAST, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
#endif
}

// `ptepack help [COMMAND]`: the usage of ptepack or of one command.
int run_help(const CLI::App& app, const CLI::App* help, const std::string& help_topic) {
  if (help_topic.empty()) {  // what --help prints (app.help() would show `help`'s own)
    std::cout << app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
    return 0;
  }
  const auto* topic = find_subcommand(app, help_topic);
  if (topic == nullptr || topic == help) {
    auto guess = nearest(help_topic, subcommand_names(app));
    auto commands = subcommand_names(app);
    std::erase(commands, help->get_name());
    return report(fmt::format("help: unknown command '{}'{}\nthe commands: {}", help_topic,
                              did_you_mean(guess), fmt::join(commands, ", ")),
                  static_cast<int>(ptepack::ErrorCode::usage));
  }
  std::cout << topic->help("ptepack");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tune_allocator();
  ptepack::install_interrupt_cleanup();
  CLI::App app{"ptepack: pack, inspect and verify multi-method model artifacts", "ptepack"};
  app.require_subcommand(0, 1);
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", version_text());
  app.footer(
      "Run 'ptepack COMMAND --help' for a command's options. Exit codes: 0 ok, 1 verify "
      "found problems or diff found differences, 2 usage, 3 invalid input, 4 conflict, 5 I/O, 70 "
      "internal.");
  auto pack = ptepack::cli::add_pack(app);
  auto dump = ptepack::cli::add_dump(app);
  auto verify = ptepack::cli::add_verify(app);
  auto diff = ptepack::cli::add_diff(app);
  auto sign = ptepack::cli::add_sign(app);
  auto files = ptepack::cli::add_files(app);
  std::string help_topic;
  auto* help = app.add_subcommand("help", "Show the usage of ptepack or of one command");
  help->add_option("command", help_topic, "pack, dump, verify, diff, sign or files");
  if (argc <= 1) {
    std::cout << app.help();
    return static_cast<int>(ptepack::ErrorCode::usage);
  }
  json_wanted = std::any_of(argv + 1, argv + argc,
                            [](const char* word) { return std::string_view(word) == "--json"; });
  auto words = joined_graph_values(argc, argv);
  std::vector<char*> pointers;
  for (auto& word : words) pointers.push_back(word.data());
  argc = static_cast<int>(pointers.size());
  argv = pointers.data();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    return report(explain(app, e, argc, argv), static_cast<int>(ptepack::ErrorCode::usage));
  }
  if (app.got_subcommand("help")) return run_help(app, help, help_topic);
  if (app.get_subcommands().empty()) {
    return report("no command given\nrun 'ptepack --help' for usage",
                  static_cast<int>(ptepack::ErrorCode::usage));
  }
  try {
    int code = app.got_subcommand("pack")   ? pack()
               : app.got_subcommand("dump") ? dump()
               : app.got_subcommand("diff") ? diff()
               : app.got_subcommand("sign")  ? sign()
               : app.got_subcommand("files") ? files()
                                             : verify();
    ptepack::wait_if_interrupted();
    return code;
  } catch (const ptepack::ProblemError& e) {
    return report(e.what(), static_cast<int>(e.code()), e.id());
  } catch (const ptepack::Error& e) {
    return report(e.what(), static_cast<int>(e.code()));
  } catch (const std::bad_alloc&) {
    return report("out of memory", static_cast<int>(ptepack::ErrorCode::internal));
  } catch (const std::exception& e) {
    return report(std::string("internal error: ") + e.what(),
                  static_cast<int>(ptepack::ErrorCode::internal));
  }
}
