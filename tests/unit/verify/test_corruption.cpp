// Corruption sweeps through the library: every truncation and seeded byte flips of each artifact
// kind end in a clean ptepack::Error or a verify problem, never a crash or an internal error.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>
#include "test_fixtures.h"
#include "test_support.h"

#include "ptepack/base/error.h"
#include "ptepack/dump/dump.h"
#include "ptepack/containers/manifest.h"
#include "containers/zip.h"
#include "ptepack/pack/pack.h"
#include "ptepack/verify/verify.h"

namespace fs = std::filesystem;
using ptepack::Error;
using ptepack::ErrorCode;

namespace {

// tmpfs when there is one: the sweeps below write thousands of files.
struct ScratchDir : ptepack::test::ScratchDir {
  ScratchDir() : ptepack::test::ScratchDir("corruption") {}
};

void write_bytes(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

const fs::path kExamples = PTEPACK_EXAMPLES_DIR;

void pack_examples(const fs::path& output, std::optional<uint64_t> cap,
                   ptepack::ShardFormat format = ptepack::ShardFormat::ptd) {
  ptepack::PackOptions options;
  options.inputs = {ptepack::parse_input_spec((kExamples / "prefill.json").string()),
                    ptepack::parse_input_spec((kExamples / "decode.json").string())};
  options.output = output;
  options.jobs = 1;
  options.sharding.max_shard_bytes = cap;
  options.sharding.format = format;
  (void)ptepack::pack(options);
}

// Shard files of a packed directory, as its manifest lists them.
std::vector<fs::path> shards_of(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& file : ptepack::test::listed_shards(dir)) out.push_back(dir / file);
  return out;
}

// The valid artifacts every sweep starts from, packed once from the examples. Capped shards make
// the directories hold several shards, like real outputs.
struct Originals {
  ScratchDir scratch;
  fs::path ptn, ptd_dir, st_dir, ptg, ptd_file, st_file;
  Originals() {
    const fs::path& root = scratch.path();
    ptn = root / "model.ptn";
    ptd_dir = root / "dir_ptd";
    st_dir = root / "dir_st";
    pack_examples(ptn, std::nullopt);
    pack_examples(ptd_dir, 3072);
    pack_examples(st_dir, 3072, ptepack::ShardFormat::safetensors);
    // A bare program with no same-stem data beside it, and bare data files.
    fs::create_directories(root / "bare");
    ptg = root / "bare" / "model.ptg";
    fs::copy_file(ptd_dir / "program.ptg", ptg);
    ptd_file = root / "bare" / "weights.ptd";
    fs::copy_file(shards_of(ptd_dir).back(), ptd_file);
    st_file = root / "bare" / "weights.safetensors";
    fs::copy_file(kExamples / "prefill.safetensors", st_file);
  }
};

const Originals& originals() {
  static Originals instance;
  return instance;
}

// Problems are collected, not asserted one by one: a sweep runs tens of thousands of cases.
struct Findings {
  std::vector<std::string> lines;
  size_t cases = 0;
  void add(std::string line) { lines.push_back(std::move(line)); }
  void require_none() const {
    std::string shown;
    for (size_t i = 0; i < lines.size() && i < 12; ++i) shown += lines[i] + "\n";
    INFO(lines.size() << " problems in " << cases << " cases; first ones:\n" << shown);
    REQUIRE(cases > 0);
    REQUIRE(lines.empty());
  }
};

// One line per problem: the CLI prints each line of a message as its own `ptepack: error:` line.
void check_message(const std::string& message, const std::string& where, Findings& findings) {
  if (message.empty() || message.back() == '\n' || message.find("\n\n") != std::string::npos) {
    findings.add(where + ": error message has an empty line: " + message);
  }
}

// dump, as the CLI runs it: true when it rendered the artifact, false on a clean error.
bool dump_accepts(const fs::path& artifact, bool json, const std::string& where,
                  Findings& findings) {
  try {
    ptepack::DumpOptions options;
    options.json = json;
    options.graph = true;
    options.jobs = 1;
    (void)ptepack::dump_artifact(artifact, options);
    return true;
  } catch (const Error& e) {
    check_message(e.what(), where, findings);
    if (e.code() == ErrorCode::internal) {
      findings.add(where + ": dump: internal error: " + e.what());
    }
  } catch (const std::exception& e) {
    findings.add(where + ": dump: exception outside ptepack::Error: " + e.what());
  }
  return false;
}

// 1 to 3 bytes XORed with non-zero masks drawn from `rng` (std::mt19937: the same cases on every
// platform), never leaving the bytes unchanged. `offsets` receives the positions changed.
std::string flipped(const std::string& original, std::mt19937& rng, std::vector<size_t>& offsets) {
  std::string bytes = original;
  while (bytes == original) {
    offsets.clear();
    auto count = static_cast<uint32_t>(1 + rng() % 3);
    for (uint32_t i = 0; i < count; ++i) {
      size_t at = rng() % bytes.size();
      bytes[at] = static_cast<char>(static_cast<uint8_t>(bytes[at]) ^ (1 + rng() % 255));
      offsets.push_back(at);
    }
  }
  return bytes;
}

// verify never throws; true when it found the artifact whole.
bool verify_accepts(const fs::path& artifact, const std::string& where, Findings& findings) {
  try {
    auto report = ptepack::verify_artifact(artifact, ptepack::VerifyOptions{1});
    for (const auto& problem : report.problems) {
      check_message(problem.text, where + ": verify", findings);
    }
    return report.ok();
  } catch (const std::exception& e) {
    findings.add(where + ": verify threw: " + e.what());
  }
  return false;
}

struct Target {
  fs::path file;      // the file being damaged (inside `artifact` for directories)
  fs::path artifact;  // what dump and verify open
  bool verify_rejects_all = true;
};

// Every prefix of the file, shorter than the file. Each must fail dump; verify must fail too
// when the target is covered by a digest or a structure that ends at the last byte.
// `middle_stride` > 1 samples the lengths between the first and last 4 KiB (every length is still
// done for the headers and the end records).
Findings sweep_truncations(const Target& target, const std::string& original,
                           size_t middle_stride = 1) {
  Findings findings;
  constexpr size_t kEdge = 4096;
  for (size_t n = 0; n < original.size();
       n += (n >= kEdge && n + kEdge < original.size()) ? middle_stride : 1) {
    write_bytes(target.file, std::string_view(original).substr(0, n));
    auto where = target.file.filename().string() + " cut to " + std::to_string(n) + " bytes";
    ++findings.cases;
    if (dump_accepts(target.artifact, n % 2 == 1, where, findings)) {
      findings.add(where + ": dump accepted it");
    }
    if (verify_accepts(target.artifact, where, findings) && target.verify_rejects_all) {
      findings.add(where + ": verify accepted it");
    }
  }
  write_bytes(target.file, original);
  return findings;
}

// A private copy of a packed directory, so sweeps can damage it.
fs::path copy_dir(const fs::path& from, const fs::path& to) {
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

}  // namespace

TEST_CASE("every truncation of a .ptn package is rejected by dump and verify", "[corruption]") {
  ScratchDir work;
  Target target{work.path() / "model.ptn", work.path() / "model.ptn"};
  sweep_truncations(target, ptepack::test::file_bytes(originals().ptn)).require_none();
}

TEST_CASE("every truncation of a directory's .ptd shard is rejected", "[corruption]") {
  ScratchDir work;
  auto dir = copy_dir(originals().ptd_dir, work.path() / "out");
  for (const auto& shard : shards_of(dir)) {
    Target target{shard, dir};
    sweep_truncations(target, ptepack::test::file_bytes(shard)).require_none();
  }
}

TEST_CASE("every truncation of a directory's safetensors shard is rejected", "[corruption]") {
  ScratchDir work;
  auto dir = copy_dir(originals().st_dir, work.path() / "out");
  for (const auto& shard : shards_of(dir)) {
    Target target{shard, dir};
    sweep_truncations(target, ptepack::test::file_bytes(shard)).require_none();
  }
}

TEST_CASE("every truncation of a directory's program.ptg is rejected", "[corruption]") {
  ScratchDir work;
  auto dir = copy_dir(originals().ptd_dir, work.path() / "out");
  Target target{dir / "program.ptg", dir};
  // The bare .ptg case below does every length through the program reader; here the point is
  // the manifest's digest, so the middle is sampled.
  sweep_truncations(target, ptepack::test::file_bytes(dir / "program.ptg"), 7).require_none();
}

TEST_CASE("every truncation of a bare .ptg is rejected by dump and verify", "[corruption]") {
  ScratchDir work;
  Target target{work.path() / "model.ptg", work.path() / "model.ptg"};
  sweep_truncations(target, ptepack::test::file_bytes(originals().ptg)).require_none();
}

TEST_CASE("every truncation of bare .ptd and .safetensors files is rejected", "[corruption]") {
  ScratchDir work;
  Target ptd{work.path() / "weights.ptd", work.path() / "weights.ptd"};
  sweep_truncations(ptd, ptepack::test::file_bytes(originals().ptd_file)).require_none();
  Target st{work.path() / "weights.safetensors", work.path() / "weights.safetensors"};
  sweep_truncations(st, ptepack::test::file_bytes(originals().st_file)).require_none();
}

TEST_CASE("truncated manifest.json: clean errors; only trailing whitespace may go",
          "[corruption]") {
  ScratchDir work;
  auto dir = copy_dir(originals().ptd_dir, work.path() / "out");
  const std::string original = ptepack::test::file_bytes(dir / "manifest.json");
  // The manifest has no digest of its own: a cut that only drops the final newline leaves the same
  // JSON document, which both commands rightly accept.
  size_t meaningful = original.find_last_not_of(" \n") + 1;
  Findings findings;
  for (size_t n = 0; n < original.size(); ++n) {
    write_bytes(dir / "manifest.json", std::string_view(original).substr(0, n));
    auto where = "manifest.json cut to " + std::to_string(n) + " bytes";
    ++findings.cases;
    bool dumped = dump_accepts(dir, n % 2 == 1, where, findings);
    bool verified = verify_accepts(dir, where, findings);
    if (n < meaningful && (dumped || verified)) findings.add(where + ": accepted");
  }
  findings.require_none();
}

namespace {

// Which byte offsets of a damaged file a CRC or digest covers, so verify must notice the change.
using Covered = std::function<bool(size_t offset)>;

struct FlipCase {
  std::vector<fs::path> files;  // damaged in turn, each from its original bytes
  fs::path artifact;            // what dump and verify open
  std::vector<std::string> pack_inputs;
  Covered covered;
};

const Covered kEveryByte = [](size_t) { return true; };
const Covered kNoByte = [](size_t) { return false; };

// Member data of a .ptn is covered by its CRC-32; header fields such as the DOS date are not.
Covered member_data_of(const fs::path& package) {
  auto members = ptepack::zip::read_directory(*ptepack::InputFile::open(package));
  return [members](size_t offset) {
    for (const auto& m : members) {
      if (offset >= m.data_offset && offset - m.data_offset < m.size) return true;
    }
    return false;
  };
}

// Each case damages one file; dump must render it or fail cleanly; pack of the damaged input must
// fail cleanly or write an output that verify accepts (a .ptn and a directory in turn).
Findings sweep_flips(const FlipCase& c, unsigned count, uint32_t seed, const fs::path& out_dir) {
  std::vector<std::string> originals;
  for (const auto& file : c.files) originals.push_back(ptepack::test::file_bytes(file));
  std::mt19937 rng(seed);
  Findings findings;
  for (unsigned i = 0; i < count; ++i) {
    size_t which = i % c.files.size();
    std::vector<size_t> offsets;
    write_bytes(c.files[which], flipped(originals[which], rng, offsets));
    auto where = c.files[which].filename().string() + " flip case " + std::to_string(i);
    ++findings.cases;
    (void)dump_accepts(c.artifact, i % 2 == 1, where, findings);
    bool covered = std::any_of(offsets.begin(), offsets.end(), c.covered);
    if (verify_accepts(c.artifact, where, findings) && covered) {
      findings.add(where + ": verify accepted damage to bytes covered by a CRC or digest");
    }
    ptepack::PackOptions options;
    for (const auto& input : c.pack_inputs)
      options.inputs.push_back(ptepack::parse_input_spec(input));
    options.output = out_dir / (i % 2 == 0 ? "packed.ptn" : "packed");
    options.jobs = 1;
    fs::remove_all(options.output);
    bool packed = false;
    try {
      (void)ptepack::pack(options);
      packed = true;
    } catch (const Error& e) {
      check_message(e.what(), where + ": pack", findings);
      if (e.code() == ErrorCode::internal) {
        findings.add(where + ": pack: internal error: " + e.what());
      }
    } catch (const std::exception& e) {
      findings.add(where + ": pack: exception outside ptepack::Error: " + e.what());
    }
    if (packed) {
      auto report = ptepack::verify_artifact(options.output, ptepack::VerifyOptions{1});
      if (!report.ok()) {
        findings.add(where +
                     ": pack succeeded but its output fails verify: " + report.problems.front().text);
      }
    }
    write_bytes(c.files[which], originals[which]);
  }
  return findings;
}

constexpr unsigned kFlipsPerFormat = 300;

}  // namespace

TEST_CASE("byte flips in a .ptn: verify sees damaged data, pack fails cleanly or verifies",
          "[corruption]") {
  ScratchDir work;
  fs::copy_file(originals().ptn, work.path() / "model.ptn");
  FlipCase c{{work.path() / "model.ptn"},
             work.path() / "model.ptn",
             {(work.path() / "model.ptn").string()},
             member_data_of(originals().ptn)};
  sweep_flips(c, kFlipsPerFormat, 1, work.path()).require_none();
}

TEST_CASE("byte flips in .ptd shards: verify rejects, pack fails cleanly or verifies",
          "[corruption]") {
  ScratchDir work;
  auto dir = copy_dir(originals().ptd_dir, work.path() / "in");
  FlipCase c{shards_of(dir), dir, {dir.string()}, kEveryByte};
  sweep_flips(c, kFlipsPerFormat, 2, work.path()).require_none();
}

TEST_CASE("byte flips in a .ptg: clean errors, or a pack that verifies", "[corruption]") {
  ScratchDir work;
  fs::copy_file(originals().ptg, work.path() / "model.ptg");
  std::string input = (work.path() / "model.ptg").string() + "@";
  auto shards = shards_of(originals().ptd_dir);
  for (size_t i = 0; i < shards.size(); ++i) input += (i > 0 ? "," : "") + shards[i].string();
  // No digest covers a bare program: verify can only run the reader and the graph rules.
  FlipCase c{{work.path() / "model.ptg"}, work.path() / "model.ptg", {input}, kNoByte};
  sweep_flips(c, kFlipsPerFormat, 3, work.path()).require_none();
}

TEST_CASE("byte flips in a .safetensors input: clean errors, or a pack that verifies",
          "[corruption]") {
  ScratchDir work;
  fs::copy_file(originals().st_file, work.path() / "prefill.safetensors");
  FlipCase c{
      {work.path() / "prefill.safetensors"},
      work.path() / "prefill.safetensors",
      {(kExamples / "prefill.json").string() + "@" + (work.path() / "prefill.safetensors").string(),
       (kExamples / "decode.json").string()},
      kNoByte};
  sweep_flips(c, kFlipsPerFormat, 4, work.path()).require_none();
}

TEST_CASE("byte flips in manifest.json: clean errors, or a pack that verifies", "[corruption]") {
  ScratchDir work;
  auto dir = copy_dir(originals().ptd_dir, work.path() / "in");
  // A flip may turn a space into another whitespace byte: same document, rightly accepted.
  FlipCase c{{dir / "manifest.json"}, dir, {dir.string()}, kNoByte};
  sweep_flips(c, kFlipsPerFormat, 5, work.path()).require_none();
}

TEST_CASE("a flip that leaves a program string invalid UTF-8 is a clean input error",
          "[corruption]") {
  // FlatBuffers strings are UTF-8, and dump --json, manifests and messages depend on it: the
  // reader rejects such a program instead of letting a JSON writer fail later (exit 70).
  ScratchDir work;
  std::string bytes = ptepack::test::file_bytes(originals().ptg);
  auto at = bytes.find("state/kv_cache");
  REQUIRE(at != std::string::npos);
  bytes[at + 6] = static_cast<char>(0xff);
  write_bytes(work.path() / "model.ptg", bytes);
  try {
    ptepack::DumpOptions json_graph;
    json_graph.json = json_graph.graph = true;
    json_graph.jobs = 1;
    (void)ptepack::dump_artifact(work.path() / "model.ptg", json_graph);
    FAIL("dump accepted a program with a non-UTF-8 key");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_input);
    CHECK_THAT(e.what(), Catch::Matchers::Contains("'state/\\xffv_cache' is not valid UTF-8"));
  }
}

TEST_CASE("a .ptg cut inside its trailing padding is rejected", "[corruption]") {
  ScratchDir work;
  const std::string bytes = ptepack::test::file_bytes(originals().ptg);
  REQUIRE(bytes.size() % 4 == 0);
  write_bytes(work.path() / "model.ptg", std::string_view(bytes).substr(0, bytes.size() - 1));
  try {
    (void)ptepack::dump_artifact(work.path() / "model.ptg", ptepack::DumpOptions{});
    FAIL("dump accepted a program cut by one byte");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_input);
    CHECK_THAT(e.what(), Catch::Matchers::Contains("not a multiple of 4"));
  }
}

TEST_CASE("manifest.json size: refused above its limit before it is read", "[corruption]") {
  using ptepack::Limits;
  ScratchDir work;
  auto dir = copy_dir(originals().ptd_dir, work.path() / "out");
  auto manifest = dir / "manifest.json";
  SECTION("one byte over the limit") {
    fs::resize_file(manifest, Limits::max_manifest_bytes + 1);  // sparse
    const std::string expected =
        "manifest of 1073741825 bytes exceeds the limit of 1073741824 bytes";
    try {
      (void)ptepack::dump_artifact(dir, ptepack::DumpOptions{});
      FAIL("dump read an oversized manifest");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_input);
      CHECK_THAT(e.what(), Catch::Contains(expected) && Catch::Contains("manifest.json"));
    }
    auto report = ptepack::verify_artifact(dir, ptepack::VerifyOptions{1});
    REQUIRE(report.problems.size() == 1);
    CHECK_THAT(report.problems[0].text, Catch::Contains(expected));
  }
  SECTION("above the 256 MiB header limit, a manifest is still read") {
    // The JSON document followed by zeros: the parser, not the size check, refuses it.
    fs::resize_file(manifest, Limits::max_header_bytes + 1);
    CHECK_THROWS_WITH(ptepack::dump_artifact(dir, ptepack::DumpOptions{}),
                      !Catch::Contains("exceeds the limit") && Catch::Contains("manifest.json"));
  }
}
