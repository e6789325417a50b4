// verify's report as text and as JSON (schema/verify.schema.json), and the problem
// identifiers' names (docs/problems.md).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/format_util.h"
#include "json/json_util.h"
#include "ptepack/verify/verify.h"

namespace ptepack {

namespace {

// What the release number was required to pass, as the text line says it.
std::string release_bounds(const VerifyReport& r) {
  std::string out;
  if (r.newer_than) out += fmt::format(", newer than {}", *r.newer_than);
  if (r.min_release) out += fmt::format(", at least {}", *r.min_release);
  return out;
}

}  // namespace

ErrorCode problem_exit_code(ProblemId id) {
  switch (id) {
    case ProblemId::file_missing:
      return ErrorCode::io;
    case ProblemId::signature_missing:
    case ProblemId::signature_invalid:
    case ProblemId::release_rollback:
      return ErrorCode::verify_failed;
    case ProblemId::file_unreadable:
    case ProblemId::file_stray:
    case ProblemId::file_changed:
    case ProblemId::shard_name:
    case ProblemId::shard_contents:
    case ProblemId::tensor_bytes:
    case ProblemId::manifest_inconsistent:
    case ProblemId::package_layout:
    case ProblemId::program_rules:
      break;
  }
  return ErrorCode::invalid_input;
}

std::string render_verify_text(const VerifyReport& r) {
  std::string out;
  if (r.ok()) {
    out +=
        fmt::format("ok: {} ({}): {} files, {} tensors, {} bytes hashed\n", r.artifact,
                    artifact_kind_name(r.kind), r.files_checked, r.tensors_checked, r.bytes_hashed);
    // What a signature proved: a line only when one was checked.
    if (r.signature && r.signature->checked && r.signature->valid) {
      out += fmt::format("signature: valid, {} by {} (key hint {}), release {}{}\n",
                         r.signature->file, r.signature->key, r.signature->key_hint.substr(0, 16),
                         r.release ? std::to_string(*r.release) : std::string("(none)"),
                         release_bounds(r));
    }
    for (const auto& p : r.programs) {
      out += fmt::format("program: {}: {} files, {} checked\n", p.file, p.files,
                         human_bytes(p.bytes));
    }
  }
  return out;
}

std::string_view problem_id_name(ProblemId id) {
  switch (id) {
    case ProblemId::file_unreadable:
      return "file_unreadable";
    case ProblemId::file_missing:
      return "file_missing";
    case ProblemId::file_stray:
      return "file_stray";
    case ProblemId::file_changed:
      return "file_changed";
    case ProblemId::shard_name:
      return "shard_name";
    case ProblemId::shard_contents:
      return "shard_contents";
    case ProblemId::tensor_bytes:
      return "tensor_bytes";
    case ProblemId::manifest_inconsistent:
      return "manifest_inconsistent";
    case ProblemId::package_layout:
      return "package_layout";
    case ProblemId::program_rules:
      return "program_rules";
    case ProblemId::signature_missing:
      return "signature_missing";
    case ProblemId::signature_invalid:
      return "signature_invalid";
    case ProblemId::release_rollback:
      return "release_rollback";
  }
  return "unknown";
}

std::string render_verify_json(const VerifyReport& r) {
  auto texts = nlohmann::json::array();
  auto details = nlohmann::json::array();
  for (const auto& p : r.problems) {
    texts.push_back(p.text);
    details.push_back({{"id", problem_id_name(p.id)}, {"file", p.file}, {"text", p.text}});
  }
  nlohmann::json j{{"format", "ptepack.verify"},
                   {"version", 1},
                   {"artifact", r.artifact},
                   {"kind", std::string(artifact_kind_name(r.kind))},
                   {"ok", r.ok()},
                   {"problems", texts},
                   {"problem_details", details},
                   {"notes", r.notes},
                   {"files_checked", r.files_checked},
                   {"tensors_checked", r.tensors_checked},
                   {"bytes_hashed", r.bytes_hashed}};
  if (r.signature) {  // only for a signed directory, or when keys were given
    j["signature"] = {{"file", r.signature->file},
                      {"checked", r.signature->checked},
                      {"valid", r.signature->valid},
                      {"key_hint", r.signature->key_hint},
                      {"key", r.signature->key}};
  }
  if (r.release) j["release"] = *r.release;
  if (r.newer_than) j["newer_than"] = *r.newer_than;
  if (r.min_release) j["min_release"] = *r.min_release;
  if (!r.programs.empty()) {  // verify --program
    auto programs = nlohmann::json::array();
    for (const auto& p : r.programs) {
      programs.push_back({{"file", p.file}, {"files", p.files}, {"bytes", p.bytes}});
    }
    j["programs"] = std::move(programs);
  }
  return json_text(j);
}

}  // namespace ptepack
