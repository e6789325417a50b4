// libFuzzer target: the stored-ZIP directory reader, then the whole .ptn package load and verify.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "containers/zip.h"
#include "fuzz_support.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/verify/reader.h"
#include "ptepack/verify/verify.h"

namespace {

// The member table must describe bytes inside the file, once per name.
void check_members(const std::vector<ptepack::zip::Member>& members, uint64_t file_size) {
  std::set<std::string> names;
  for (const auto& m : members) {
    if (!names.insert(m.name).second) ptepack::fuzz::invariant_failed("duplicate member returned");
    if (!ptepack::range_within(m.data_offset, m.size, file_size) ||
        m.local_header_offset >= m.data_offset) {
      ptepack::fuzz::invariant_failed("member data outside the file: " + m.name);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ptepack::fuzz::MemoryFile input("fuzz.ptn");
  input.assign(data, size);
  try {
    auto file = ptepack::InputFile::open(input.path());
    auto members = ptepack::zip::read_directory(*file);
    check_members(members, size);
    std::vector<uint8_t> buffer(64 * 1024);
    for (const auto& member : members) (void)ptepack::zip::crc_matches(*file, member, buffer);
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
    return 0;
  }
  // Only a local-header signature makes load_artifact treat the file as a package.
  if (size < 4 || std::memcmp(data, "PK\x03\x04", 4) != 0) return 0;
  try {
    ptepack::Artifact artifact = ptepack::load_artifact(input.path());
    if (artifact.kind != ptepack::ArtifactKind::package || !artifact.program) {
      ptepack::fuzz::invariant_failed("package loaded without a program");
    }
    ptepack::fuzz::check_ranges_inside(artifact.data, "package");
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
  }
  // verify promises to report, never to throw, for any artifact; its reports always render (the
  // JSON one needs every problem line to be valid UTF-8).
  auto report = ptepack::verify_artifact(input.path(), ptepack::VerifyOptions{1});
  (void)ptepack::render_verify_text(report);
  (void)ptepack::render_verify_json(report);
  return 0;
}
