// Tests for the .ptd (FlatTensor) plan and reader, and agreement with an independent reader.
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/byte_reader.h"
#include "base/checked.h"
#include "ptepack/base/error.h"
#include "containers/flat_tensor.h"
#include "ptepack/hash/sha256.h"
#include "ptepack/schema/flat_tensor_generated.h"
#include "graph/program_checks.h"
#include "pte/data_checks.h"
#include "verify/verify_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
namespace fbs = flat_tensor_flatbuffer;
using Catch::Matchers::Contains;
using ptepack::DType;
using ptepack::ErrorCode;
using ptepack::ptd::Entry;
using ptepack::ptd::Layout;

namespace {

using ptepack::test::TempDir;


// The whole file the writer would produce: head, segments at their offsets, zeros between.
std::string file_bytes(const Layout& layout, const std::vector<std::string>& segments) {
  std::string out = layout.head;
  for (size_t s = 0; s < segments.size(); ++s) {
    out.resize(static_cast<size_t>(layout.segment_offsets[s]), '\0');
    out += segments[s];
  }
  REQUIRE(out.size() == layout.file_size);
  return out;
}

std::vector<uint64_t> sizes_of(const std::vector<std::string>& segments) {
  std::vector<uint64_t> out;
  for (const auto& s : segments) out.push_back(s.size());
  return out;
}

ptepack::ptd::File read_bytes(const TempDir& dir, const std::string& bytes,
                              const std::string& name = "t.ptd") {
  ptepack::test::write_file(dir.path() / name, bytes);
  return ptepack::ptd::read_file(ptepack::InputFile::open(dir.path() / name));
}

std::string read_tensor(const ptepack::TensorData& t) {
  auto v = t.bytes.file->read_range(t.bytes.offset, t.bytes.size);
  return {v.begin(), v.end()};
}

// Reads must fail with invalid_input and a message containing `needle`.
void expect_invalid(const TempDir& dir, const std::string& bytes, const std::string& needle) {
  try {
    read_bytes(dir, bytes, "bad.ptd");
    FAIL("read succeeded, expected: " << needle);
  } catch (const ptepack::Error& e) {
    CHECK(e.code() == ErrorCode::invalid_input);
    CHECK_THAT(e.what(), Contains(needle) && Contains("bad.ptd: "));
  }
}

std::string pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + static_cast<char>(i * 7));
  return s;
}

// A fixture covering several dtypes, a scalar, an empty tensor and a shared segment.
struct Sample {
  std::vector<Entry> entries{
      {"a/w", DType::FLOAT, {2, 3}, 0},   {"b/idx", DType::UINT16, {5}, 1},
      {"c/scalar", DType::LONG, {}, 2},   {"d/empty", DType::INT, {0, 4}, 3},
      {"e/alias", DType::INT, {3, 2}, 0}, {"f/h", DType::BFLOAT16, {1, 1, 3}, 4},
  };
  std::vector<std::string> segments{pattern(24, 'a'), pattern(10, 'b'), pattern(8, 'c'), "",
                                    pattern(6, 'd')};
};

uint64_t header_u64(const std::string& head, size_t at) {
  return ptepack::load_u64(reinterpret_cast<const uint8_t*>(head.data()) + at);
}

}  // namespace

TEST_CASE("ptd: plan_file output reads back with keys, dtypes, shapes and bytes") {
  Sample s;
  TempDir dir;
  Layout layout = ptepack::ptd::plan_file(s.entries, sizes_of(s.segments), 128);
  auto file = read_bytes(dir, file_bytes(layout, s.segments));

  CHECK(file.version == 0);
  CHECK(file.segment_base == layout.segment_base);
  REQUIRE(file.segments.size() == s.segments.size());
  REQUIRE(file.tensors.size() == s.entries.size());
  for (const Entry& e : s.entries) {
    INFO(e.key);
    const auto& t = file.tensors.at(e.key);
    CHECK(t.dtype == e.dtype);
    CHECK(t.shape == e.shape);
    CHECK(t.bytes.offset == layout.segment_offsets[e.segment]);
    CHECK(t.bytes.size == s.segments[e.segment].size());
    CHECK(read_tensor(t) == s.segments[e.segment]);
  }

  // The FH01 header fields, and the stored scalar type ids (UINT16 is 27 in a .ptd, 16 in a .ptg).
  const std::string& head = layout.head;
  CHECK(head.substr(4, 4) == "FT01");
  CHECK(head.substr(8, 4) == "FH01");
  CHECK(ptepack::load_u32(reinterpret_cast<const uint8_t*>(head.data()) + 12) == 40);
  CHECK(header_u64(head, 16) == 48);
  const uint64_t fb_size = header_u64(head, 24);
  CHECK(header_u64(head, 32) == layout.segment_base);
  CHECK(header_u64(head, 40) == layout.file_size - layout.segment_base);
  // Undo the insertion to get the flatbuffer as FlatBufferBuilder made it, then decode it.
  std::string original = head.substr(0, 8) + head.substr(56, static_cast<size_t>(fb_size - 8));
  std::vector<uint8_t> fb(original.begin(), original.end());
  uint32_t root = ptepack::load_u32(fb.data()) - 48;
  for (size_t i = 0; i < 4; ++i) fb[i] = static_cast<uint8_t>(root >> (8 * i));
  flatbuffers::Verifier verifier(fb.data(), fb.size());
  REQUIRE(fbs::VerifyFlatTensorBuffer(verifier));
  const auto* named = fbs::GetFlatTensor(fb.data())->named_data();
  REQUIRE(named->size() == s.entries.size());
  CHECK(named->Get(1)->key()->str() == "b/idx");
  CHECK(static_cast<int>(named->Get(1)->tensor_layout()->scalar_type()) == 27);
  CHECK(static_cast<int>(named->Get(0)->tensor_layout()->scalar_type()) == 6);
  CHECK(named->Get(2)->tensor_layout()->sizes()->size() == 0);
  CHECK(named->Get(2)->tensor_layout()->dim_order() != nullptr);
}

TEST_CASE("ptd: every dtype's .ptd id carries the same name in the generated enum") {
  for (DType d :
       {DType::BYTE, DType::CHAR, DType::SHORT, DType::INT, DType::LONG, DType::HALF, DType::FLOAT,
        DType::DOUBLE, DType::BOOL, DType::BFLOAT16, DType::UINT16, DType::UINT32, DType::UINT64}) {
    auto id = static_cast<executorch_flatbuffer::ScalarType>(ptepack::ptd_scalar_type(d));
    CHECK(std::string(executorch_flatbuffer::EnumNameScalarType(id)) ==
          std::string(ptepack::dtype_name(d)));
  }
}

TEST_CASE("ptd: segments and the segment base are aligned, padding is zero") {
  Sample s;
  for (uint64_t alignment : {uint64_t{16}, uint64_t{128}, uint64_t{4096}}) {
    INFO("alignment " << alignment);
    Layout layout = ptepack::ptd::plan_file(s.entries, sizes_of(s.segments), alignment);
    CHECK(layout.segment_base % alignment == 0);
    CHECK(layout.head.size() == layout.segment_base);
    const uint64_t unpadded = 48 + header_u64(layout.head, 24);
    CHECK(layout.segment_base == *ptepack::align_up(unpadded, alignment));
    CHECK(layout.head.find_first_not_of('\0', static_cast<size_t>(unpadded)) == std::string::npos);
    REQUIRE(layout.segment_offsets.size() == s.segments.size());
    CHECK(layout.segment_offsets[0] == layout.segment_base);
    for (size_t i = 0; i < layout.segment_offsets.size(); ++i) {
      CHECK(layout.segment_offsets[i] % alignment == 0);
      if (i > 0) {
        CHECK(layout.segment_offsets[i] ==
              *ptepack::align_up(layout.segment_offsets[i - 1] + s.segments[i - 1].size(),
                                 alignment));
      }
    }
    CHECK(layout.file_size == layout.segment_offsets.back() + s.segments.back().size());
    TempDir dir;
    auto file = read_bytes(dir, file_bytes(layout, s.segments));
    CHECK(read_tensor(file.tensors.at("f/h")) == s.segments[4]);
  }
}

TEST_CASE("ptd: two keys share one segment with different layouts") {
  std::vector<Entry> entries{{"m/a", DType::FLOAT, {4}, 0}, {"m/b", DType::BYTE, {2, 8}, 0}};
  std::vector<std::string> segments{pattern(16, 'x')};
  TempDir dir;
  Layout layout = ptepack::ptd::plan_file(entries, sizes_of(segments), 128);
  auto file = read_bytes(dir, file_bytes(layout, segments));
  REQUIRE(file.segments.size() == 1);
  const auto& a = file.tensors.at("m/a");
  const auto& b = file.tensors.at("m/b");
  CHECK(a.bytes.offset == b.bytes.offset);
  CHECK(a.dtype == DType::FLOAT);
  CHECK(b.dtype == DType::BYTE);
  CHECK(b.shape == ptepack::Shape{2, 8});
  CHECK(file.segment_keys == std::vector<uint32_t>{2});
  CHECK(read_tensor(b) == segments[0]);
}

TEST_CASE("ptd: head size bound holds and is tight on random entry sets") {
  std::mt19937 rng(20240611);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const DType dtypes[] = {DType::BYTE, DType::HALF, DType::FLOAT, DType::LONG, DType::UINT16};
  for (int round = 0; round < 300; ++round) {
    const int n = pick(0, 40);
    std::vector<Entry> entries;
    std::vector<uint64_t> segment_sizes;
    for (int i = 0; i < n; ++i) {
      Entry e;
      e.key = fmt::format("{:04d}/", i) + std::string(static_cast<size_t>(pick(0, 300)), 'k');
      e.dtype = dtypes[pick(0, 4)];
      for (int d = pick(0, 7); d > 0; --d) e.shape.push_back(pick(0, 5));
      // Opaque entries (delegate named data) carry no layout.
      if (pick(0, 4) == 0) {
        e.opaque = true;
        e.dtype = DType::BYTE;
        e.shape = {pick(0, 64)};
      }
      const uint64_t bytes = *ptepack::byte_size(e.dtype, e.shape);
      // Reuse an equally sized segment now and then, as dedup does.
      e.segment = static_cast<uint32_t>(segment_sizes.size());
      for (size_t s = 0; s < segment_sizes.size(); ++s) {
        if (segment_sizes[s] == bytes && pick(0, 1) == 1) e.segment = static_cast<uint32_t>(s);
      }
      if (e.segment == segment_sizes.size()) segment_sizes.push_back(bytes);
      entries.push_back(std::move(e));
    }
    uint64_t bound = ptepack::ptd::head_bound_fixed() +
                     segment_sizes.size() * ptepack::ptd::head_bound_segment();
    for (const Entry& e : entries) {
      bound += ptepack::ptd::head_bound_entry(e.key.size(), e.shape.size(), e.opaque);
    }
    Layout layout = ptepack::ptd::plan_file(entries, segment_sizes, 16);
    const uint64_t actual = 48 + header_u64(layout.head, 24);
    INFO("round " << round << " keys " << n << " segments " << segment_sizes.size());
    REQUIRE(actual <= bound);
    // Entries are counted exactly; only vtables, alignment and segment padding leave slack.
    // (One vtable more is budgeted than a file without opaque entries uses.)
    CHECK(bound - actual <= 92 + 4 * segment_sizes.size());
  }
}

TEST_CASE("ptd: the header size model equals the builder on random files") {
  // Key lengths across every remainder mod 4, ranks 0..9, opaque entries, up to
  // 60 segments: every padding and vtable variant the builder can reach.
  std::mt19937 rng(20261202);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  ptepack::ptd::FileSizer sizer;
  ptepack::ptd::HeaderSizeModel model;
  for (int round = 0; round < 3000; ++round) {
    const int n = pick(0, 30);
    std::vector<Entry> entries;
    for (int i = 0; i < n; ++i) {
      Entry e;
      e.key = fmt::format("{:03d}", i) + std::string(static_cast<size_t>(pick(0, 40)), 'k');
      e.dtype = DType::BYTE;
      for (int d = pick(0, 9); d > 0; --d) e.shape.push_back(1);
      e.opaque = pick(0, 3) == 0;
      if (e.opaque) e.shape = {1};
      entries.push_back(std::move(e));
    }
    // One segment per entry, or fewer when entries share (every segment referenced).
    const int segments = n == 0 ? 0 : pick(1, n);
    for (int i = 0; i < n; ++i) {
      entries[static_cast<size_t>(i)].segment = static_cast<uint32_t>(i < segments ? i : 0);
    }
    const std::vector<uint64_t> segment_sizes(static_cast<size_t>(segments), 1);
    model.reset();
    for (const Entry& e : entries) model.add(e.key.size(), e.shape.size(), e.opaque);
    INFO("round " << round << " keys " << n << " segments " << segments);
    REQUIRE(48 + model.flatbuffer_size(static_cast<uint64_t>(segments)) ==
            sizer.size(entries, segment_sizes, 16).header_size);
  }
}

TEST_CASE("ptd: plan_file is deterministic") {
  Sample s;
  Layout a = ptepack::ptd::plan_file(s.entries, sizes_of(s.segments), 128);
  Layout b = ptepack::ptd::plan_file(s.entries, sizes_of(s.segments), 128);
  CHECK(a.head == b.head);
  CHECK(a.segment_offsets == b.segment_offsets);
  CHECK(a.file_size == b.file_size);
  Layout c = ptepack::ptd::plan_file(s.entries, sizes_of(s.segments), 256);
  CHECK(c.head != a.head);
}

TEST_CASE("ptd: an independent Python reader agrees with the C++ reader") {
  Sample s;
  TempDir dir;
  Layout layout = ptepack::ptd::plan_file(s.entries, sizes_of(s.segments), 128);
  const fs::path path = dir.path() / "sample.ptd";
  ptepack::test::write_file(path, file_bytes(layout, s.segments));
  const fs::path tool = fs::path(PTEPACK_TEST_DATA_DIR) / ".." / "tools" / "ptd_reader.py";
  const std::string command = "python3 '" + tool.string() + "' '" + path.string() + "'";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char chunk[4096];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) output.append(chunk, n);
  REQUIRE(::pclose(pipe) == 0);

  auto json = nlohmann::json::parse(output);
  auto file = ptepack::ptd::read_file(ptepack::InputFile::open(path));
  CHECK(json["file_size"] == layout.file_size);
  CHECK(json["header"]["length"] == 40);
  CHECK(json["header"]["flatbuffer_offset"] == 48);
  CHECK(json["header"]["segment_base_offset"] == file.segment_base);
  CHECK(json["header"]["segment_data_size"] == layout.file_size - file.segment_base);
  REQUIRE(json["segments"].size() == file.segments.size());
  for (size_t i = 0; i < file.segments.size(); ++i) {
    CHECK(json["segments"][i]["file_offset"] == file.segments[i].offset);
    CHECK(json["segments"][i]["size"] == file.segments[i].size);
  }
  REQUIRE(json["named_data"].size() == s.entries.size());
  for (size_t i = 0; i < s.entries.size(); ++i) {
    const auto& j = json["named_data"][i];
    const std::string key = j["key"];
    INFO(key);
    const auto& t = file.tensors.at(key);
    CHECK(key == s.entries[i].key);
    const auto& segment = file.segments.at(j["segment_index"].get<size_t>());
    CHECK(t.bytes.offset == segment.offset);
    CHECK(t.bytes.size == segment.size);
    CHECK(j["tensor_layout"]["scalar_type"] == ptepack::ptd_scalar_type(t.dtype));
    CHECK(j["tensor_layout"]["scalar_type_name"] == std::string(ptepack::dtype_name(t.dtype)));
    CHECK(j["tensor_layout"]["sizes"].get<std::vector<int64_t>>() == t.shape);
    CHECK(j["sha256"] == ptepack::to_hex(ptepack::sha256(read_tensor(t))));
  }
  CHECK(json["named_data"][1]["tensor_layout"]["scalar_type"] == 27);
}

// ---- Malformed files -------------------------------------------------------------------------

namespace {

struct RawLayout {
  int scalar_type = 0;
  std::vector<int32_t> sizes;
  std::vector<uint8_t> dim_order;
};
struct RawNamed {
  std::string key;
  uint32_t segment = 0;
  std::optional<RawLayout> layout;
};
struct RawFile {
  std::vector<RawNamed> named;
  std::vector<std::pair<uint64_t, uint64_t>> segments;  // relative offset, size
  std::string data;                                     // segment data after the base
  bool omit_segments = false;
};

// Builds files plan_file refuses to write, with the header inserted the same way.
std::string craft(const RawFile& raw) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fbs::NamedData>> named;
  for (const auto& n : raw.named) {
    auto key = b.CreateString(n.key);
    flatbuffers::Offset<fbs::TensorLayout> layout;
    if (n.layout) {
      auto sizes = b.CreateVector(n.layout->sizes);
      auto order = b.CreateVector(n.layout->dim_order);
      layout = fbs::CreateTensorLayout(
          b, static_cast<executorch_flatbuffer::ScalarType>(n.layout->scalar_type), sizes, order);
    }
    named.push_back(fbs::CreateNamedData(b, key, n.segment, layout));
  }
  std::vector<flatbuffers::Offset<fbs::DataSegment>> segments;
  for (auto [offset, size] : raw.segments) {
    segments.push_back(fbs::CreateDataSegment(b, offset, size));
  }
  auto segments_vec = raw.omit_segments ? 0 : b.CreateVector(segments);
  auto named_vec = b.CreateVector(named);
  fbs::FinishFlatTensorBuffer(b, fbs::CreateFlatTensor(b, 0, segments_vec, named_vec));
  std::string fb(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  const uint64_t base = *ptepack::align_up(48 + fb.size(), 16);
  std::string out;
  ptepack::put_u32(out, ptepack::load_u32(b.GetBufferPointer()) + 48);
  out += fb.substr(4, 4) + "FH01";
  ptepack::put_u32(out, 40);
  for (uint64_t v : {uint64_t{48}, uint64_t{fb.size()}, base, uint64_t{raw.data.size()}}) {
    ptepack::put_u64(out, v);
  }
  out.resize(56, '\0');
  out += fb.substr(8);
  out.resize(static_cast<size_t>(base), '\0');
  return out + raw.data;
}

RawNamed byte_entry(std::string key, uint32_t segment, std::vector<int32_t> sizes) {
  std::vector<uint8_t> order;
  for (size_t d = 0; d < sizes.size(); ++d) order.push_back(static_cast<uint8_t>(d));
  return {std::move(key), segment, RawLayout{0, std::move(sizes), std::move(order)}};
}

void set_u32(std::string& bytes, size_t at, uint32_t v) {
  std::string le;
  ptepack::put_u32(le, v);
  bytes.replace(at, 4, le);
}

}  // namespace

TEST_CASE("ptd: segments no key references are counted and noted") {
  // Valid FlatTensor that ptepack never writes: three segments, the middle one unused.
  RawFile raw;
  raw.segments = {{0, 16}, {16, 24}, {48, 8}};
  raw.data = pattern(56, 'x');
  raw.named = {byte_entry("m/a", 0, {16}), byte_entry("m/b", 2, {8}), byte_entry("m/c", 0, {4, 4})};
  TempDir dir;
  auto file = read_bytes(dir, craft(raw));
  CHECK(file.segment_keys == std::vector<uint32_t>{2, 0, 1});
  std::vector<std::string> notes;
  ptepack::note_unreferenced_segments(file, notes);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::EndsWith(": segment 1 (24 bytes) is referenced by no key"));
}

TEST_CASE("ptd: truncation at every byte offset is rejected, flipped bytes never crash") {
  Sample s;
  TempDir dir;
  const std::string good =
      file_bytes(ptepack::ptd::plan_file(s.entries, sizes_of(s.segments), 16), s.segments);
  for (size_t len = 0; len < good.size(); ++len) {
    INFO("truncated to " << len);
    expect_invalid(dir, good.substr(0, len), "");
  }
  const size_t head_end = static_cast<size_t>(48 + header_u64(good, 24));
  for (size_t at = 0; at < head_end; ++at) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    try {
      read_bytes(dir, bad, "flip.ptd");
    } catch (const ptepack::Error& e) {
      INFO("flipped byte " << at << ": " << e.what());
      CHECK(e.code() == ErrorCode::invalid_input);
    }
  }
}

TEST_CASE("ptd: malformed headers are rejected with their field named") {
  TempDir dir;
  Sample s;
  const std::string good =
      file_bytes(ptepack::ptd::plan_file(s.entries, sizes_of(s.segments), 16), s.segments);
  std::string bad = good;
  bad[5] = 'X';
  expect_invalid(dir, bad, "not a FlatTensor file: identifier 'FX01'");
  bad = good;
  bad[8] = 'G';
  expect_invalid(dir, bad, "missing FH01 extended header: found 'GH01'");
  bad = good;
  set_u32(bad, 12, 32);
  expect_invalid(dir, bad, "FH01 header length 32 is less than 40");
  bad = good;
  set_u32(bad, 36, 1);  // high half of segment_base_offset
  expect_invalid(dir, bad, "exceeds the file size");
  bad = good;
  set_u32(bad, 24, 1u << 30);  // flatbuffer_size
  expect_invalid(dir, bad, "does not fit the file");
  expect_invalid(dir, "0123", "4 bytes is too small");
}

TEST_CASE("ptd: malformed tables are rejected naming the key or segment") {
  TempDir dir;
  const std::string data16(16, '\x11');
  RawFile ok{{byte_entry("k", 0, {16})}, {{0, 16}}, data16};
  CHECK(read_bytes(dir, craft(ok)).tensors.at("k").shape == ptepack::Shape{16});

  RawFile f = ok;
  f.segments = {{0, 100}};
  expect_invalid(dir, craft(f), "segment 0 (offset 0, size 100) is outside the segment data");
  f = ok;
  f.named[0].segment = 3;
  expect_invalid(dir, craft(f), "key 'k': segment_index 3 is out of range (1 segments)");
  f.named[0].segment = 1;  // the exact bound: one past the last segment
  expect_invalid(dir, craft(f), "key 'k': segment_index 1 is out of range (1 segments)");
  f = ok;
  f.named.push_back(byte_entry("k", 0, {16}));
  expect_invalid(dir, craft(f), "duplicate key 'k'");
  f = ok;
  f.named[0].layout->scalar_type = 9;
  expect_invalid(dir, craft(f), "key 'k': unknown scalar type 9");
  // Every ExecuTorch ScalarType is read, quantised and FLOAT8 ones included.
  f.named[0].layout->scalar_type = 12;
  CHECK(read_bytes(dir, craft(f)).tensors.at("k").dtype == DType::QINT8);
  f.named[0].layout->scalar_type = 24;
  CHECK(read_bytes(dir, craft(f)).tensors.at("k").dtype == DType::FLOAT8E4M3FN);
  f = ok;
  f.named[0].layout = RawLayout{6, {3}, {0}};
  expect_invalid(dir, craft(f), "key 'k': layout FLOAT [3] needs 12 bytes but segment 0 holds 16");
  // Any permutation is a valid dim_order (channels-last constants exist).
  f.named[0].layout = RawLayout{0, {2, 8}, {1, 0}};
  CHECK(read_bytes(dir, craft(f)).tensors.at("k").dim_order == std::vector<uint8_t>{1, 0});
  f.named[0].layout = RawLayout{0, {2, 8}, {0, 0}};
  expect_invalid(dir, craft(f), "dim_order [0, 0] is not a permutation");
  f.named[0].layout = RawLayout{0, {2, 8}, {0}};
  expect_invalid(dir, craft(f), "dim_order has 1 entries for rank 2");
  f.named[0].layout = RawLayout{0, {-1}, {0}};
  expect_invalid(dir, craft(f), "size[0] = -1 is negative");
  f.named[0].layout = RawLayout{0, std::vector<int32_t>(33, 1), std::vector<uint8_t>(33, 0)};
  expect_invalid(dir, craft(f), "rank 33 exceeds the limit 32");
  f = ok;
  f.named[0].key = "";
  expect_invalid(dir, craft(f), "named_data[0] has an empty key");
  f.named[0].key = std::string(ptepack::Limits::max_key_length + 1, 'x');
  expect_invalid(dir, craft(f), "key of 4097 bytes exceeds the limit of 4096");
  f = ok;
  f.omit_segments = true;
  expect_invalid(dir, craft(f), "FlatTensor has no segments vector");

  // Without tensor_layout a key reads as raw bytes of its segment.
  f = ok;
  f.named[0].layout.reset();
  auto file = read_bytes(dir, craft(f));
  CHECK(file.tensors.at("k").dtype == DType::BYTE);
  CHECK(file.tensors.at("k").shape == ptepack::Shape{16});
  CHECK(read_tensor(file.tensors.at("k")) == data16);
}

TEST_CASE("ptd: plan_file rejects broken preconditions and unrepresentable data") {
  auto code_of = [](const std::vector<Entry>& entries, const std::vector<uint64_t>& sizes,
                    uint64_t alignment, const std::string& needle) {
    try {
      ptepack::ptd::plan_file(entries, sizes, alignment);
    } catch (const ptepack::Error& e) {
      CHECK_THAT(e.what(), Contains(needle));
      return e.code();
    }
    FAIL("plan_file succeeded, expected: " << needle);
    return ErrorCode::usage;
  };
  const std::vector<uint64_t> one{4};
  CHECK(code_of({{"b", DType::INT, {1}, 0}, {"a", DType::INT, {1}, 0}}, one, 128,
                "keys not sorted and unique: 'b' then 'a'") == ErrorCode::internal);
  CHECK(code_of({{"a", DType::INT, {1}, 0}, {"a", DType::INT, {1}, 0}}, one, 128,
                "keys not sorted and unique") == ErrorCode::internal);
  CHECK(code_of({{"a", DType::INT, {1}, 0}}, one, 8, "alignment 8 is not a power of two") ==
        ErrorCode::internal);
  CHECK(code_of({{"a", DType::INT, {1}, 0}}, one, 192, "alignment 192") == ErrorCode::internal);
  CHECK(code_of({{"a", DType::INT, {1}, 0}}, {4, 4}, 128, "segment 1 is not referenced") ==
        ErrorCode::internal);
  CHECK(code_of({{"a", DType::INT, {1}, 1}}, one, 128, "key 'a': segment 1 out of range") ==
        ErrorCode::internal);
  CHECK(code_of({{"a", DType::INT, {2}, 0}}, one, 128, "layout needs 8 bytes, segment 0 has 4") ==
        ErrorCode::internal);
  CHECK(code_of({{"a", DType::BYTE, {int64_t{1} << 31, 0}, 0}}, {0}, 128,
                "key 'a': dim 0 = 2147483648 does not fit the int32 sizes") ==
        ErrorCode::invalid_input);
  CHECK(code_of({{"", DType::INT, {1}, 0}}, one, 128, "must be 1 to 4096 bytes") ==
        ErrorCode::invalid_input);
}

TEST_CASE("ptd: an empty plan is a valid file with no keys") {
  TempDir dir;
  Layout layout = ptepack::ptd::plan_file({}, {}, 128);
  CHECK(layout.file_size == layout.segment_base);
  auto file = read_bytes(dir, layout.head);
  CHECK(file.tensors.empty());
  CHECK(file.segments.empty());
}
