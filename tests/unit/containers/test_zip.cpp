// Tests for the stored ZIP layer: layout, round trips, Python's zipfile as the independent
// reader and writer, ZIP64 through sparse files, determinism, and hostile archives.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "base/byte_reader.h"
#include "ptepack/base/error.h"
#include "containers/zip.h"
#include "test_support.h"

namespace fs = std::filesystem;
using ptepack::Error;
using ptepack::ErrorCode;
using ptepack::InputFile;
namespace zip = ptepack::zip;

namespace {

constexpr uint64_t kGiB = 1ULL << 30;

using ptepack::test::TempDir;

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

uint32_t crc_of(std::string_view s) { return zip::crc32_update(0, as_bytes(s)); }

using ptepack::test::write_file;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct ZipSample {
  std::string name;
  std::string bytes;
};

// Lays an archive out with the writer API and assembles it in memory.
std::string build_archive(const std::vector<ZipSample>& entries, uint64_t alignment = 64) {
  std::vector<std::pair<std::string, uint64_t>> sizes;
  std::vector<uint32_t> crcs;
  for (const ZipSample& e : entries) {
    sizes.emplace_back(e.name, e.bytes.size());
    crcs.push_back(crc_of(e.bytes));
  }
  zip::ArchivePlan plan = zip::plan_archive(sizes, alignment);
  std::string out(plan.end_offset, '\x55');  // gaps would show up as wrong bytes
  for (size_t i = 0; i < entries.size(); ++i) {
    const zip::EntryPlan& p = plan.entries[i];
    std::string header = zip::local_header(p, crcs[i]);
    REQUIRE(header.size() == p.data_offset - p.header_offset);
    out.replace(p.header_offset, header.size(), header);
    out.replace(p.data_offset, p.size, entries[i].bytes);
  }
  std::string directory = zip::central_directory(plan, crcs);
  REQUIRE(directory.size() == plan.end_offset - plan.directory_offset);
  out.replace(plan.directory_offset, directory.size(), directory);
  return out;
}

std::vector<ZipSample> sample_entries() {
  std::string program(300, '\0');
  for (size_t i = 0; i < program.size(); ++i) program[i] = static_cast<char>(i * 7 + 3);
  return {{"program.ptg", program},
          {"program.safetensors", std::string(1000, 'w')},
          {"empty", ""},
          {"aliases.json", R"({"decode/w": "prefill/w"})"},
          {"donn\xc3\xa9"
           "es/\xc3\xa9t\xc3\xa9.bin",
           "utf-8 name"}};
}

std::vector<zip::Member> read_members(const TempDir& dir, const std::string& bytes) {
  fs::path path = (dir / "archive.zip");
  write_file(path, bytes);
  return zip::read_directory(*InputFile::open(path));
}

// The message of the invalid_input error that reading `bytes` must raise.
std::string read_error(const TempDir& dir, const std::string& bytes) {
  try {
    read_members(dir, bytes);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_input);
    return e.what();
  }
  FAIL("read_directory accepted a corrupt archive");
  return {};
}

void patch_u16(std::string& bytes, uint64_t at, uint16_t value) {
  std::string le;
  ptepack::put_u16(le, value);
  bytes.replace(at, 2, le);
}

void patch_u32(std::string& bytes, uint64_t at, uint32_t value) {
  std::string le;
  ptepack::put_u32(le, value);
  bytes.replace(at, 4, le);
}

// Replaces every little-endian occurrence of `from` (ZIP64 fields) by `to`.
int replace_u64(std::string& bytes, uint64_t from, uint64_t to) {
  std::string old_le, new_le;
  ptepack::put_u64(old_le, from);
  ptepack::put_u64(new_le, to);
  int count = 0;
  for (size_t at = bytes.find(old_le); at != std::string::npos; at = bytes.find(old_le, at)) {
    bytes.replace(at, 8, new_le);
    ++count;
  }
  return count;
}

// Runs a Python script on `args` through the shell and returns its output; the exit
// status must be 0.
std::string run_python(const TempDir& dir, const std::string& script, const std::string& args) {
  fs::path script_path = (dir / "check.py");
  fs::path output_path = (dir / "python.out");
  write_file(script_path, script);
  std::string command =
      "python3 '" + script_path.string() + "' " + args + " > '" + output_path.string() + "' 2>&1";
  int status = std::system(command.c_str());
  std::string output = read_text(output_path);
  INFO(output);
  REQUIRE(status == 0);
  return output;
}

// Lists members the way Python's zipfile sees them; reads (and CRC-checks) the members
// no larger than argv[2] bytes, and runs testzip() when argv[3] is "testzip".
const char* const kZipfileLister = R"PY(
import json, struct, sys, zipfile
path, max_read, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = []
with zipfile.ZipFile(path) as z, open(path, 'rb') as f:
    if mode == 'testzip':
        assert z.testzip() is None
    for i in z.infolist():
        f.seek(i.header_offset + 26)
        n, e = struct.unpack('<HH', f.read(4))
        out.append({'name': i.filename, 'size': i.file_size, 'compress_size': i.compress_size,
                    'crc': i.CRC, 'header_offset': i.header_offset,
                    'data_offset': i.header_offset + 30 + n + e, 'method': i.compress_type,
                    'date_time': list(i.date_time), 'create_system': i.create_system,
                    'create_version': i.create_version, 'extract_version': i.extract_version,
                    'flag_bits': i.flag_bits, 'external_attr': i.external_attr,
                    'central_extra': i.extra.hex(),
                    'data': z.read(i).hex() if i.file_size <= max_read else None})
print(json.dumps(out))
)PY";

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    auto u = static_cast<unsigned char>(c);
    out += digits[u >> 4];
    out += digits[u & 15];
  }
  return out;
}

// An in-memory file (memfd) for loops that read thousands of variants: a disk-backed
// temp file costs milliseconds per rewrite.
class MemoryFile {
 public:
  MemoryFile() : fd_(::memfd_create("ptepack-zip-test", MFD_CLOEXEC)) { REQUIRE(fd_ >= 0); }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  std::vector<zip::Member> read(const std::string& bytes) const {
    REQUIRE(::ftruncate(fd_, 0) == 0);
    REQUIRE(::pwrite(fd_, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
    return zip::read_directory(*InputFile::open("/proc/self/fd/" + std::to_string(fd_)));
  }

 private:
  int fd_;
};

// Hex of consecutive fields of the given widths, separated by spaces.
std::string fields(std::string_view bytes, std::initializer_list<size_t> widths) {
  std::string out;
  size_t at = 0;
  for (size_t width : widths) {
    if (!out.empty()) out += ' ';
    out += hex(bytes.substr(at, width));
    at += width;
  }
  REQUIRE(at == bytes.size());
  return out;
}

// Writes a file of `size` bytes that is zero (a hole) except for `pieces`.
void write_sparse(const fs::path& path, uint64_t size,
                  const std::vector<std::pair<uint64_t, std::string>>& pieces) {
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
  for (const auto& [offset, bytes] : pieces) {
    auto written = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    REQUIRE(written == static_cast<ssize_t>(bytes.size()));
  }
  REQUIRE(::close(fd) == 0);
}

// CRC-32 of `length` zero bytes (a multiple of `chunk`) by doubling with crc32_combine.
uint32_t crc_of_zeros(uint64_t length, uint64_t chunk) {
  std::string zeros(chunk, '\0');
  uint32_t chunk_crc = crc_of(zeros);
  uint32_t result = 0;
  uint64_t done = 0;
  uint32_t power = chunk_crc;  // CRC of `power_length` zeros
  uint64_t power_length = chunk;
  for (uint64_t blocks = length / chunk; blocks != 0; blocks >>= 1) {
    if (blocks & 1) {
      result = done == 0 ? power : zip::crc32_combine(result, power, power_length);
      done += power_length;
    }
    power = zip::crc32_combine(power, power, power_length);
    power_length *= 2;
  }
  REQUIRE(done == length);
  return result;
}

}  // namespace

TEST_CASE("crc32_update and crc32_combine agree with a one-pass CRC", "[zip]") {
  CHECK(crc_of("123456789") == 0xCBF43926u);  // the standard CRC-32 check value
  CHECK(crc_of("") == 0u);
  std::string data(3 * 1024 * 1024 + 17, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
  uint32_t whole = crc_of(data);
  for (size_t split : {size_t{0}, size_t{1}, size_t{4096}, data.size() / 2, data.size()}) {
    std::string_view a = std::string_view(data).substr(0, split);
    std::string_view b = std::string_view(data).substr(split);
    CHECK(zip::crc32_combine(crc_of(a), crc_of(b), b.size()) == whole);
    CHECK(zip::crc32_update(crc_of(a), as_bytes(b)) == whole);
  }
  // 64 MiB of zeros: doubling with combine equals reading them.
  CHECK(crc_of_zeros(64 << 20, 1 << 20) == crc_of(std::string(64 << 20, '\0')));
  // Lengths beyond zlib's z_off_t are shifted in steps; combining with 0 is a pure shift.
  uint32_t a = crc_of("abc"), b = crc_of("defg");
  CHECK(zip::crc32_combine(a, b, (1ULL << 63) + 5) ==
        zip::crc32_combine(zip::crc32_combine(a, 0, 1ULL << 62), b, (1ULL << 62) + 5));
}

// Bit-at-a-time CRC-32 (reflected 0xEDB88320): the definition, independent of zlib
// and of the carry-less folding path.
uint32_t crc_bitwise(uint32_t crc, std::span<const uint8_t> bytes) {
  crc = ~crc;
  for (uint8_t b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST_CASE("crc32_update equals the bitwise definition at every length, start and seed", "[zip]") {
  // The folding path takes spans of 64 bytes and more in multiples of 16; shorter
  // spans and tails go through zlib. Every length up to 1100 at 17 start offsets
  // (unaligned loads included), chained from a non-zero CRC, covers both and the seams.
  std::vector<uint8_t> data(1100 + 32);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& b : data) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  size_t mismatches = 0;
  for (size_t start = 0; start < 17; ++start) {
    for (size_t length = 0; length <= 1100; ++length) {
      std::span<const uint8_t> span(data.data() + start, length);
      for (uint32_t seed : {0u, 0xCBF43926u}) {
        if (zip::crc32_update(seed, span) != crc_bitwise(seed, span)) ++mismatches;
      }
    }
  }
  CHECK(mismatches == 0);
  // One large span (many fold iterations) against the definition.
  std::vector<uint8_t> big(5 * 1024 * 1024 + 13);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>((i * 2654435761u) >> 11);
  CHECK(zip::crc32_update(7, big) == crc_bitwise(7, big));
}

TEST_CASE("plan_archive places entries back to back with aligned data", "[zip]") {
  for (uint64_t alignment : {uint64_t{4}, uint64_t{64}, uint64_t{4096}, uint64_t{32768}}) {
    std::vector<std::pair<std::string, uint64_t>> entries;
    for (size_t length = 1; length <= 70; ++length) {
      entries.emplace_back(std::string(length, 'n') + std::to_string(length), length * 3);
    }
    zip::ArchivePlan plan = zip::plan_archive(entries, alignment);
    REQUIRE(plan.entries.size() == entries.size());
    uint64_t next = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      const zip::EntryPlan& e = plan.entries[i];
      CHECK(e.name == entries[i].first);
      CHECK(e.size == entries[i].second);
      CHECK(e.header_offset == next);
      CHECK(e.data_offset % alignment == 0);
      uint64_t padding = e.data_offset - e.header_offset - 30 - e.name.size();
      CHECK(padding >= 4);  // always room for the 0xD935 field header
      CHECK(padding < alignment + 4);
      CHECK_FALSE(e.zip64);
      next = e.data_offset + e.size;
    }
    CHECK(plan.directory_offset == next);
    uint64_t directory = 0;
    for (const auto& [name, size] : entries) directory += 46 + name.size();
    CHECK(plan.end_offset == plan.directory_offset + directory + 22);
  }
}

TEST_CASE("plan_archive switches to ZIP64 exactly at the 32-bit limits", "[zip]") {
  zip::ArchivePlan small = zip::plan_archive({{"a", 0xFFFFFFFEull}});
  CHECK_FALSE(small.entries[0].zip64);
  zip::ArchivePlan big = zip::plan_archive({{"a", 0xFFFFFFFFull}, {"b", 1}});
  CHECK(big.entries[0].zip64);
  CHECK(big.entries[0].data_offset == 64);  // 30 + 1 + 20 (ZIP64 extra) + 4 -> 64
  CHECK(big.entries[1].zip64);              // its header offset is past 4 GiB
  // Directory: "a" with both sizes (46+1+4+16), "b" with only the offset (46+1+4+8);
  // then ZIP64 end record (56) + locator (20) + end record (22).
  CHECK(big.end_offset - big.directory_offset == 67 + 59 + 56 + 20 + 22);
  // 64 + 0xFFFFFFBF puts the second header exactly at 0xFFFFFFFF, one byte less does not.
  zip::ArchivePlan below = zip::plan_archive({{"a", 0xFFFFFFBEull}, {"b", 1}});
  CHECK(below.entries[1].header_offset == 0xFFFFFFFEull);
  CHECK_FALSE(below.entries[1].zip64);
  CHECK(below.end_offset - below.directory_offset == 47 + 47 + 56 + 20 + 22);
  zip::ArchivePlan late = zip::plan_archive({{"a", 0xFFFFFFBFull}, {"b", 1}});
  CHECK_FALSE(late.entries[0].zip64);
  CHECK(late.entries[1].header_offset == 0xFFFFFFFFull);
  CHECK(late.entries[1].zip64);
  CHECK(late.end_offset - late.directory_offset == 47 + 59 + 56 + 20 + 22);
}

TEST_CASE("plan_archive rejects caller errors", "[zip]") {
  auto internal_error = [](const std::vector<std::pair<std::string, uint64_t>>& entries,
                           uint64_t alignment, const std::string& expected) {
    try {
      zip::plan_archive(entries, alignment);
      FAIL("plan_archive accepted " << expected);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::internal);
      CHECK_THAT(e.what(), Catch::Contains(expected));
    }
  };
  internal_error({{"a", 1}}, 48, "alignment 48 is not a power of two");
  internal_error({{"a", 1}}, 2, "alignment 2");
  internal_error({{"a", 1}}, 65536, "alignment 65536");
  internal_error({{"a", 1}, {"a", 2}}, 64, "duplicate entry 'a'");
  internal_error({{"../evil", 1}}, 64, "'..' path component");
  internal_error({{"", 1}}, 64, "empty name");
  internal_error({{"a", UINT64_MAX - 10}}, 64, "overflows 64 bits");
  internal_error({{"a", 1ULL << 62}, {"b", 1ULL << 62}, {"c", 1ULL << 62}, {"d", 1ULL << 62}}, 64,
                 "overflows 64 bits");
}

TEST_CASE("a written archive reads back with names, offsets, sizes and CRCs", "[zip]") {
  TempDir dir;
  std::vector<ZipSample> entries = sample_entries();
  std::string bytes = build_archive(entries);
  std::vector<zip::Member> members = read_members(dir, bytes);
  auto file = InputFile::open((dir / "archive.zip"));
  REQUIRE(members.size() == entries.size());
  uint64_t header = 0;
  std::vector<uint8_t> buffer(7);  // tiny, so CRC checks stream in many chunks
  for (size_t i = 0; i < entries.size(); ++i) {
    const zip::Member& m = members[i];
    CHECK(m.name == entries[i].name);
    CHECK(m.local_header_offset == header);
    CHECK(m.data_offset % 64 == 0);
    CHECK(m.size == entries[i].bytes.size());
    CHECK(m.crc32 == crc_of(entries[i].bytes));
    CHECK(bytes.substr(m.data_offset, m.size) == entries[i].bytes);
    CHECK(zip::crc_matches(*file, m, buffer));
    header = m.data_offset + m.size;
  }
  // Corrupted data is not a directory problem, but the CRC check sees it.
  bytes[members[1].data_offset + 500] ^= 1;
  members = read_members(dir, bytes);
  std::vector<uint8_t> empty_buffer;
  CHECK_FALSE(
      zip::crc_matches(*InputFile::open((dir / "archive.zip")), members[1], empty_buffer));
  CHECK(empty_buffer.size() == 1 << 20);
}

TEST_CASE("headers carry the documented fixed values", "[zip]") {
  std::string bytes = build_archive({{"a", "hi"}});
  REQUIRE(bytes.size() == 135);
  CHECK(crc_of("hi") == 0xd8932aacu);
  // Local header: signature, version 20, flags 0, stored, 00:00 1980-01-01, CRC, sizes 2,
  // name length 1, extra length 33; name; 0xD935 field with 29 zero bytes; data at 64.
  CHECK(fields(bytes.substr(0, 30), {4, 2, 2, 2, 2, 2, 4, 4, 4, 2, 2}) ==
        "504b0304 1400 0000 0000 0000 2100 ac2a93d8 02000000 02000000 0100 2100");
  CHECK(bytes.substr(30, 1) == "a");
  CHECK(fields(bytes.substr(31, 4), {2, 2}) == "35d9 1d00");
  CHECK(bytes.substr(35, 29) == std::string(29, '\0'));
  CHECK(bytes.substr(64, 2) == "hi");
  // Central entry: made by 0x032D (Unix, 4.5), needed 20, flags, method, time, date, CRC,
  // sizes, name/extra/comment lengths, disk, internal and external (0100644 << 16)
  // attributes, local header offset.
  CHECK(fields(bytes.substr(66, 46), {4, 2, 2, 2, 2, 2, 2, 4, 4, 4, 2, 2, 2, 2, 2, 4, 4}) ==
        "504b0102 2d03 1400 0000 0000 0000 2100 ac2a93d8 02000000 02000000 0100 0000 0000 "
        "0000 0000 0000a481 00000000");
  CHECK(bytes.substr(112, 1) == "a");
  // End record: disks 0, one entry, directory of 47 bytes at offset 66, no comment.
  CHECK(fields(bytes.substr(113), {4, 2, 2, 2, 2, 4, 4, 2}) ==
        "504b0506 0000 0000 0100 0100 2f000000 42000000 0000");
}

TEST_CASE("Python's zipfile reads the written archive", "[zip][python]") {
  TempDir dir;
  std::vector<ZipSample> entries = sample_entries();
  std::string bytes = build_archive(entries);
  write_file((dir / "archive.zip"), bytes);
  std::vector<zip::Member> members = read_members(dir, bytes);
  auto listed = nlohmann::json::parse(run_python(
      dir, kZipfileLister, "'" + (dir / "archive.zip").string() + "' 1000000 testzip"));
  REQUIRE(listed.size() == entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& info = listed[i];
    INFO(entries[i].name);
    CHECK(info["name"] == entries[i].name);
    CHECK(info["size"] == entries[i].bytes.size());
    CHECK(info["compress_size"] == entries[i].bytes.size());
    CHECK(info["crc"] == crc_of(entries[i].bytes));
    CHECK(info["header_offset"] == members[i].local_header_offset);
    CHECK(info["data_offset"] == members[i].data_offset);
    CHECK(info["method"] == 0);
    CHECK(info["date_time"] == nlohmann::json::array({1980, 1, 1, 0, 0, 0}));
    CHECK(info["create_system"] == 3);
    CHECK(info["create_version"] == 45);
    CHECK(info["extract_version"] == 20);
    CHECK(info["flag_bits"] == (i == 4 ? 0x800 : 0));  // only the non-ASCII name
    CHECK(info["external_attr"] == 0100644u << 16);
    CHECK(info["central_extra"] == "");
    CHECK(info["data"] == hex(entries[i].bytes));
  }
}

TEST_CASE("Python-written archives read back, with and without data descriptors", "[zip][python]") {
  TempDir dir;
  const char* writer = R"PY(
import io, sys, zipfile
path, mode = sys.argv[1], sys.argv[2]
members = [('a.txt', b'hello'), ('dir/b.bin', bytes(range(256)) * 3)]
class Sink(io.RawIOBase):  # not seekable, so zipfile appends data descriptors
    def __init__(self): self.buf = bytearray()
    def writable(self): return True
    def write(self, b): self.buf += b; return len(b)
sink = Sink() if mode == 'stream' else open(path, 'wb')
with zipfile.ZipFile(sink, 'w', zipfile.ZIP_STORED) as z:
    for name, data in members: z.writestr(name, data)
if mode == 'stream': open(path, 'wb').write(sink.buf)
)PY";
  std::string b_bytes;
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 256; ++i) b_bytes += static_cast<char>(i);
  }
  for (std::string mode : {"file", "stream"}) {
    INFO(mode);
    fs::path path = (dir / ("py-" + mode + ".zip"));
    run_python(dir, writer, "'" + path.string() + "' " + mode);
    std::string bytes = read_text(path);
    std::vector<zip::Member> members = read_members(dir, bytes);
    REQUIRE(members.size() == 2);
    CHECK(members[0].name == "a.txt");
    CHECK(bytes.substr(members[0].data_offset, members[0].size) == "hello");
    CHECK(members[1].name == "dir/b.bin");
    CHECK(bytes.substr(members[1].data_offset, members[1].size) == b_bytes);
    CHECK(members[1].crc32 == crc_of(b_bytes));
    if (mode == "stream") {
      // Descriptor: signature, CRC-32, sizes; a wrong CRC there is a disagreement.
      uint64_t descriptor = members[0].data_offset + members[0].size;
      REQUIRE(ptepack::load_u32(as_bytes(bytes).data() + descriptor) == 0x08074b50u);
      bytes[descriptor + 4] ^= 1;
      CHECK_THAT(read_error(dir, bytes),
                 Catch::Contains("member 'a.txt': data descriptor at offset " +
                                 std::to_string(descriptor) + " disagrees"));
    }
  }
}

TEST_CASE("the same entries give the same bytes", "[zip]") {
  std::string first = build_archive(sample_entries());
  CHECK(build_archive(sample_entries()) == first);
  zip::ArchivePlan plan = zip::plan_archive({{"a", 3}, {"b", 5}});
  CHECK(zip::central_directory(plan, {1, 2}) ==
        zip::central_directory(zip::plan_archive({{"a", 3}, {"b", 5}}), {1, 2}));
  CHECK(zip::local_header(plan.entries[1], 9) == zip::local_header(plan.entries[1], 9));
  // Order is the caller's: swapping entries changes the archive.
  std::vector<ZipSample> swapped = sample_entries();
  std::swap(swapped[0], swapped[1]);
  CHECK(build_archive(swapped) != first);
}

TEST_CASE("a 5 GiB member in a sparse file uses ZIP64 and reads back", "[zip][python]") {
  TempDir dir;
  const uint64_t big = 5 * kGiB;
  std::string program = "program bytes";
  std::string aliases = R"({"x": "y"})";
  // CRC of 5 GiB of zeros without reading them: combine 1 MiB chunk CRCs, two ways.
  uint32_t zeros_crc = crc_of_zeros(big, 1 << 20);
  uint32_t mib_crc = crc_of(std::string(1 << 20, '\0'));
  uint32_t sequential = mib_crc;
  for (uint64_t done = 1 << 20; done < big; done += 1 << 20) {
    sequential = zip::crc32_combine(sequential, mib_crc, 1 << 20);
  }
  CHECK(zeros_crc == sequential);

  zip::ArchivePlan plan = zip::plan_archive(
      {{"program.ptg", program.size()}, {"big.bin", big}, {"aliases.json", aliases.size()}});
  CHECK_FALSE(plan.entries[0].zip64);
  CHECK(plan.entries[1].zip64);  // size
  CHECK(plan.entries[2].zip64);  // header offset
  CHECK(plan.entries[2].header_offset > 0xFFFFFFFFull);
  std::vector<uint32_t> crcs = {crc_of(program), zeros_crc, crc_of(aliases)};
  std::vector<std::string> headers;
  for (size_t i = 0; i < 3; ++i) headers.push_back(zip::local_header(plan.entries[i], crcs[i]));
  std::string directory = zip::central_directory(plan, crcs);
  REQUIRE(directory.size() == plan.end_offset - plan.directory_offset);
  CHECK(directory.find(std::string("PK\x06\x06", 4)) != std::string::npos);
  CHECK(directory.find(std::string("PK\x06\x07", 4)) != std::string::npos);
  auto write = [&](const std::vector<std::string>& h, const std::string& d) {
    write_sparse((dir / "big.zip"), plan.end_offset,
                 {{plan.entries[0].header_offset, h[0]},
                  {plan.entries[0].data_offset, program},
                  {plan.entries[1].header_offset, h[1]},
                  {plan.entries[2].header_offset, h[2]},
                  {plan.entries[2].data_offset, aliases},
                  {plan.directory_offset, d}});
    return InputFile::open((dir / "big.zip"));
  };

  SECTION("read_directory and zipfile see the ZIP64 sizes and offsets") {
    auto file = write(headers, directory);
    std::vector<zip::Member> members = zip::read_directory(*file);
    REQUIRE(members.size() == 3);
    CHECK(members[1].name == "big.bin");
    CHECK(members[1].size == big);
    CHECK(members[1].data_offset == plan.entries[1].data_offset);
    CHECK(members[1].crc32 == zeros_crc);
    CHECK(members[2].local_header_offset == plan.entries[2].header_offset);
    CHECK(members[2].data_offset == plan.entries[2].data_offset);
    std::vector<uint8_t> buffer;
    CHECK(zip::crc_matches(*file, members[2], buffer));
    auto listed = nlohmann::json::parse(
        run_python(dir, kZipfileLister, "'" + (dir / "big.zip").string() + "' 1000 list"));
    REQUIRE(listed.size() == 3);
    CHECK(listed[1]["name"] == "big.bin");
    CHECK(listed[1]["size"] == big);
    CHECK(listed[1]["crc"] == zeros_crc);
    CHECK(listed[1]["data_offset"] == plan.entries[1].data_offset);
    CHECK(listed[1]["extract_version"] == 45);
    CHECK(listed[2]["header_offset"] == plan.entries[2].header_offset);
    CHECK(listed[2]["data"] == hex(aliases));  // found through the ZIP64 offset
    CHECK(listed[0]["data"] == hex(program));
  }
  SECTION("a size near UINT64_MAX is caught by checked arithmetic") {
    const uint64_t huge = UINT64_MAX - 7;
    std::vector<std::string> h = headers;
    std::string d = directory;
    CHECK(replace_u64(h[1], big, huge) == 2);
    CHECK(replace_u64(d, big, huge) == 2);
    try {
      zip::read_directory(*write(h, d));
      FAIL("accepted a size near UINT64_MAX");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_input);
      CHECK_THAT(e.what(), Catch::Contains("member 'big.bin': data at offset " +
                                           std::to_string(plan.entries[1].data_offset) + " of " +
                                           std::to_string(huge) + " bytes runs past"));
    }
  }
  SECTION("end record and ZIP64 end record must agree") {
    std::string d = directory;
    patch_u32(d, d.size() - 22 + 8, 0x00040004);  // entries on disk and total: 3 -> 4
    try {
      zip::read_directory(*write(headers, d));
      FAIL("accepted disagreeing end records");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_input);
      CHECK_THAT(e.what(), Catch::Contains("disagrees with the ZIP64 end record (entries 3"));
    }
  }
}

TEST_CASE("65535 members use a ZIP64 end record; 65536 are rejected", "[zip][python]") {
  TempDir dir;
  for (size_t count : {size_t{65535}, size_t{65536}}) {
    std::vector<ZipSample> entries;
    for (size_t i = 0; i < count; ++i) entries.push_back({"m" + std::to_string(i), ""});
    std::string bytes = build_archive(entries, 4);
    CHECK(bytes.find(std::string("PK\x06\x06", 4)) != std::string::npos);
    if (count == 65535) {
      std::vector<zip::Member> members = read_members(dir, bytes);
      CHECK(members.size() == 65535);
      CHECK(members.back().name == "m65534");
      std::string out = run_python(
          dir, "import sys, zipfile\nprint(len(zipfile.ZipFile(sys.argv[1]).infolist()))\n",
          "'" + (dir / "archive.zip").string() + "'");
      CHECK(out == "65535\n");
    } else {
      CHECK_THAT(read_error(dir, bytes),
                 Catch::Contains("archive.zip: 65536 members, more than the limit of 65535"));
    }
  }
}

TEST_CASE("a truncated archive is rejected at every length", "[zip][hostile]") {
  MemoryFile file;
  std::string bytes = build_archive(sample_entries());
  REQUIRE(file.read(bytes).size() == 5);
  for (size_t length = 0; length < bytes.size(); ++length) {
    INFO("truncated to " << length << " bytes");
    try {
      file.read(bytes.substr(0, length));
      FAIL("accepted a truncated archive");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_input);
    }
  }
}

TEST_CASE("flipping any byte never crashes the reader", "[zip][hostile]") {
  MemoryFile file;
  std::string bytes = build_archive(sample_entries());
  size_t rejected = 0;
  for (size_t at = 0; at < bytes.size(); ++at) {
    std::string corrupt = bytes;
    corrupt[at] = static_cast<char>(corrupt[at] ^ 0xA5);
    bool accepted = false;
    try {
      file.read(corrupt);
      accepted = true;
    } catch (const Error& e) {
      INFO("flipped byte " << at << ": " << e.what());
      CHECK(e.code() == ErrorCode::invalid_input);
      ++rejected;
    }
    // Every field of the end record is structural (counts, sizes, offsets, disks).
    if (at >= bytes.size() - 22) CHECK_FALSE(accepted);
  }
  // Data, padding, times and attributes may change freely (the CRC check is separate);
  // signatures, lengths, offsets, names, methods and flags may not.
  CHECK(rejected > 400);
}

TEST_CASE("targeted corruptions are rejected with a precise message", "[zip][hostile]") {
  TempDir dir;
  std::vector<ZipSample> entries = {{"a.bin", "first member"}, {"b.bin", "second"}, {"xx/evil", "x"}};
  const std::string good = build_archive(entries);
  zip::ArchivePlan plan = zip::plan_archive({{"a.bin", 12}, {"b.bin", 6}, {"xx/evil", 1}});
  REQUIRE(plan.end_offset == good.size());
  REQUIRE(read_members(dir, good).size() == 3);
  const uint64_t cd = plan.directory_offset;
  const uint64_t central[3] = {cd, cd + 46 + 5, cd + 46 + 5 + 46 + 5};
  const uint64_t end = good.size() - 22;
  const uint64_t b_local = plan.entries[1].header_offset;
  const uint64_t evil_local = plan.entries[2].header_offset;
  std::string bytes = good;
  auto rename = [&](size_t i, uint64_t local, const std::string& name) {
    bytes.replace(local + 30, name.size(), name);
    bytes.replace(central[i] + 46, name.size(), name);
  };

  SECTION("no end record") {
    CHECK_THAT(read_error(dir, "not a zip file at all, just some text"),
               Catch::Contains("archive.zip: no end of central directory record"));
    bytes += "trailing";
    CHECK_THAT(read_error(dir, bytes), Catch::Contains("no end of central directory record"));
  }
  SECTION("multi-disk") {
    patch_u16(bytes, end + 4, 1);
    CHECK_THAT(read_error(dir, bytes), Catch::Contains("multi-disk archives are not supported"));
  }
  SECTION("central directory offset") {
    patch_u32(bytes, end + 16, static_cast<uint32_t>(cd + 1));
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("central directory at offset " + std::to_string(cd + 1)));
  }
  SECTION("central directory larger than the limit") {
    patch_u32(bytes, end + 12, 0x10000001);
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("central directory of 268435457 bytes exceeds the limit"));
  }
  SECTION("local header offset outside the file") {
    patch_u32(bytes, central[1] + 42, 0x7FFFFFF0);
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("member 'b.bin': local header offset 2147483632 is outside"));
  }
  SECTION("local header offset that points at no local header") {
    patch_u32(bytes, central[1] + 42, static_cast<uint32_t>(b_local + 1));
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("member 'b.bin': no local header at offset " +
                               std::to_string(b_local + 1)));
  }
  SECTION("compressed member") {
    patch_u16(bytes, central[1] + 10, 8);
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("member 'b.bin': compressed (method 8); only stored members"));
    bytes = good;
    patch_u16(bytes, b_local + 8, 8);
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("member 'b.bin': compressed (local header method 8)"));
  }
  SECTION("encrypted member") {
    patch_u16(bytes, central[0] + 8, 1);
    CHECK_THAT(read_error(dir, bytes), Catch::Contains("member 'a.bin': encrypted"));
  }
  SECTION("stored sizes that differ") {
    patch_u32(bytes, central[0] + 20, 13);
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("member 'a.bin': stored member has compressed size 13"));
  }
  SECTION("central and local names differ") {
    bytes[b_local + 30] = 'c';
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("member 'b.bin': local header at offset " + std::to_string(b_local) +
                               " names 'c.bin' instead"));
  }
  SECTION("central and local sizes differ") {
    patch_u32(bytes, b_local + 22, 7);
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("member 'b.bin': local header at offset " + std::to_string(b_local) +
                               " (size 7, compressed 6"));
  }
  SECTION("extra field overrunning its area") {
    const uint64_t a_local = plan.entries[0].header_offset;
    patch_u16(bytes, a_local + 30 + 5 + 2, 0x100);  // the 0xD935 field claims 256 bytes
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("member 'a.bin': extra field 0xd935 at offset " +
                               std::to_string(a_local + 35) + " claims 256 bytes"));
  }
  SECTION("duplicate names") {
    rename(1, b_local, "a.bin");
    CHECK_THAT(read_error(dir, bytes), Catch::Contains("duplicate member name 'a.bin'"));
  }
  SECTION("unsafe names") {
    rename(2, evil_local, "../evil");
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("member '../evil' (central directory entry at offset " +
                               std::to_string(central[2]) + "): unsafe name: '..' path"));
    rename(2, evil_local, "xx/../e");
    CHECK_THAT(read_error(dir, bytes), Catch::Contains("'..' path component"));
    rename(2, evil_local, "/xx/evi");
    CHECK_THAT(read_error(dir, bytes), Catch::Contains("unsafe name: absolute path"));
    rename(2, evil_local, "xx\\evil");
    CHECK_THAT(read_error(dir, bytes), Catch::Contains("unsafe name: backslash in name"));
    rename(2, evil_local, "C:/evil");
    CHECK_THAT(read_error(dir, bytes), Catch::Contains("unsafe name: drive-letter path"));
    rename(2, evil_local, "xx..vil");  // dots inside a component are fine
    CHECK(read_members(dir, bytes)[2].name == "xx..vil");
  }
  SECTION("trailing bytes in the central directory") {
    patch_u32(bytes, end + 8, 0x00020002);  // 2 entries instead of 3
    CHECK_THAT(read_error(dir, bytes),
               Catch::Contains("unexpected bytes after the 2 central directory entries"));
  }
  SECTION("overlapping members") {
    // Member 'b' (header and data) hides inside the data of member 'a'.
    std::string b_data = "hidden";
    zip::EntryPlan b = zip::plan_archive({{"b", b_data.size()}}).entries[0];
    b.header_offset += 64;
    b.data_offset += 64;
    std::string a_data = zip::local_header(b, crc_of(b_data)) + b_data;
    zip::ArchivePlan overlap = zip::plan_archive({{"a", a_data.size()}});
    REQUIRE(overlap.entries[0].data_offset == 64);
    overlap.entries.push_back(b);
    std::string archive = zip::local_header(overlap.entries[0], crc_of(a_data)) + a_data +
                          zip::central_directory(overlap, {crc_of(a_data), crc_of(b_data)});
    CHECK_THAT(read_error(dir, archive), Catch::Contains("members 'a' (offsets 0..") &&
                                             Catch::Contains("and 'b' (from offset 64) overlap"));
  }
}
