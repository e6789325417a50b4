// The one reader of .ptn packages (verify/package_reader.h): every member, its CRC-32, the
// program, the weights and aliases.json, by one set of rules for every command.
#include "verify/package_reader.h"

#include <fmt/format.h>

#include "containers/safetensors.h"
#include "containers/zip.h"
#include "graph/program_keys.h"
#include "hash/parallel_hash.h"
#include "json/json_util.h"
#include "ptepack/base/error.h"
#include "verify/verify_support.h"

namespace ptepack::detail {

namespace {

using MembersByName = std::map<std::string, const zip::Member*>;

// Each member: expected, aligned for mmap, and its CRC-32 right.
MembersByName check_members(const InputFile& file, const std::vector<zip::Member>& members,
                            Diagnostics& problems, VerifyReport& report) {
  const auto name = file.name();
  MembersByName by_name;
  auto buffer = chunk_buffer(file.size());
  for (const auto& m : members) {
    if (m.name != "program.ptg" && m.name != "program.safetensors" && m.name != "aliases.json") {
      problems.add({ProblemId::package_layout, name,
                    fmt::format("{}: unexpected member {}", name, quote(m.name))});
    }
    by_name[m.name] = &m;
    if (m.data_offset % 64 != 0) {
      // Valid ZIP (ExecuTorch's write_ptn stores entries right after their
      // headers); 64-byte alignment is what ptepack writes, for mmap.
      report.notes.push_back(fmt::format(
          "{}:{}: data at offset {} is not 64-byte aligned (ptepack aligns entries for mmap)", name,
          m.name, m.data_offset));
    }
    if (!zip::crc_matches(file, m, buffer)) {
      problems.add({ProblemId::file_changed, name,
                    fmt::format("{}:{}: CRC-32 does not match the stored bytes", name, m.name)});
    }
    report.bytes_hashed += m.size;
  }
  return by_name;
}

// aliases.json: read, then each alias checked against the stored keys and added
// to `data` as its owner's tensor.
std::map<std::string, std::string> check_aliases(const InputFile& file, const zip::Member& a,
                                                 const ProgramKeys& keys, TensorTable& data,
                                                 Diagnostics& problems) {
  std::map<std::string, std::string> aliases;
  auto context = file.name() + ":aliases.json";
  auto add = [&](std::string text) {
    problems.add({ProblemId::package_layout, file.name(), std::move(text)});
  };
  attempt(problems, ProblemId::file_unreadable, file.name(), [&] {
    if (a.size > Limits::max_header_bytes) fail_input("{}: too large", context);
    const auto raw = file.read_range(a.data_offset, a.size);
    auto json = parse_json_strict(std::string(raw.begin(), raw.end()), context);
    if (!json.is_object() || json.empty())
      fail_input("{}: expected a non-empty object of alias -> owner", context);
    for (const auto& [alias, owner] : json.items()) {
      if (!owner.is_string()) fail_input("{}: owner of {} is not a string", context, quote(alias));
      aliases.emplace(alias, owner.get<std::string>());
    }
  });
  for (const auto& [alias, owner] : aliases) {
    auto o = data.find(owner);
    if (data.count(alias)) add(fmt::format("{}: alias {} is also stored", context, quote(alias)));
    if (aliases.count(owner))
      add(fmt::format("{}: owner {} is itself an alias", context, quote(owner)));
    if (keys.is_mutated(alias) || keys.is_mutated(owner)) {
      add(fmt::format("{}: state key in alias {} -> {} (state keys are never deduplicated)",
                      context, quote(alias), quote(owner)));
    }
    if (!(owner < alias)) {
      add(fmt::format("{}: owner {} is not the smallest key of its group (alias {})", context,
                      quote(owner), quote(alias)));
    }
    if (o == data.end()) {
      add(fmt::format("{}: owner {} of {} is not stored", context, quote(owner), quote(alias)));
      continue;
    }
    data.emplace(alias, o->second);
  }
  return aliases;
}

}  // namespace

bool read_package(const InputFilePtr& file, Diagnostics& problems, VerifyReport& report,
                  PackageParts& out) {
  const auto name = file->name();
  std::vector<zip::Member> members;
  if (!attempt(problems, ProblemId::file_unreadable, name,
               [&] { members = zip::read_directory(*file); }))
    return false;
  report.files_checked = 1;
  auto by_name = check_members(*file, members, problems, report);
  if (!by_name.count("program.ptg")) {
    problems.add({ProblemId::package_layout, name,
                  fmt::format("{}: package has no program.ptg member", name)});
    return false;
  }
  const auto* pm = by_name["program.ptg"];
  if (!attempt(problems, ProblemId::file_unreadable, name, [&] {
        if (pm->size > Limits::max_program_bytes) fail_input("{}:program.ptg: too large", name);
        out.program =
            read_program_buffer(file->read_range(pm->data_offset, pm->size), name + ":program.ptg");
      })) {
    return false;
  }
  out.program_bytes = pm->size;
  if (by_name.count("program.safetensors")) {
    const auto* w = by_name["program.safetensors"];
    attempt(problems, ProblemId::file_unreadable, name, [&] {
      out.data =
          safetensors::read(file, w->data_offset, w->size, name + ":program.safetensors").tensors;
    });
  }
  const ProgramKeys keys(out.program.root());
  if (by_name.count("aliases.json")) {
    out.aliases = check_aliases(*file, *by_name["aliases.json"], keys, out.data, problems);
  }
  return true;
}

}  // namespace ptepack::detail
