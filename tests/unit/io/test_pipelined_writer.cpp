// The pipelined writer: bytes land where they were submitted, with or without background
// flushes, and a failed flush fails the write instead of being lost.
#include <fcntl.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <stop_token>

#include "ptepack/base/error.h"
#include "hash/parallel_hash.h"
#include "io/pipelined_writer.h"
#include "core/file_content.h"
#include "test_support.h"

using ptepack::Error;
using ptepack::ErrorCode;
using ptepack::OutputFile;
using ptepack::PipelinedWriter;

namespace {

constexpr size_t kBuffer = 64 << 10;
constexpr size_t kChunks = 40;  // 2.5 MiB

// Chunk c filled with a byte pattern of its own; the last chunk is short.
size_t fill_chunk(std::span<uint8_t> buffer, size_t c) {
  size_t size = c + 1 == kChunks ? kBuffer / 3 : kBuffer;
  for (size_t i = 0; i < size; ++i) buffer[i] = static_cast<uint8_t>((c * 131 + i * 7) & 0xff);
  return size;
}

// Writes every chunk through a writer flushing every `flush_every` bytes (0: never).
uint64_t write_chunks(OutputFile& file, uint64_t flush_every) {
  PipelinedWriter writer(file, 3, kBuffer, flush_every);
  uint64_t offset = 0;
  for (size_t c = 0; c < kChunks; ++c) {
    size_t size = fill_chunk(writer.acquire(), c);
    writer.submit(offset, size);
    offset += size;
  }
  writer.finish();
  return offset;
}

}  // namespace

TEST_CASE("pipelined writes land at their offsets, flushed in the background or not") {
  ptepack::test::TempDir dir;
  for (uint64_t flush_every : {uint64_t{0}, uint64_t{kBuffer}, uint64_t{5 * kBuffer}}) {
    INFO("flush every " << flush_every);
    auto path = dir / ("out-" + std::to_string(flush_every));
    OutputFile file(path, path.string());
    uint64_t size = write_chunks(file, flush_every);
    file.finish(size);

    auto bytes = ptepack::test::file_bytes(path);
    REQUIRE(bytes.size() == size);
    std::vector<uint8_t> expected(kBuffer);
    uint64_t offset = 0;
    for (size_t c = 0; c < kChunks; ++c) {
      size_t n = fill_chunk(expected, c);
      INFO("chunk " << c);
      REQUIRE(std::memcmp(expected.data(), bytes.data() + offset, n) == 0);
      offset += n;
    }
  }
}

TEST_CASE("a failed background flush fails the write, naming the file") {
  // /dev/null takes every write and refuses fdatasync (EINVAL): only a flush can fail.
  auto open_null = [] { return OutputFile(::open("/dev/null", O_WRONLY | O_CLOEXEC), "sink"); };
  {
    OutputFile file = open_null();
    CHECK(write_chunks(file, 0) > 0);  // no flusher: nothing fails
  }
  OutputFile file = open_null();
  try {
    write_chunks(file, kBuffer);
    FAIL("the flush error was lost");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
    CHECK(std::string(e.what()) == "sink: fsync failed: Invalid argument");
  }
}

TEST_CASE("a write asked to stop fails before its next chunk and writes no more") {
  ptepack::test::TempDir dir;
  ptepack::FileContent content;
  content.size = 3 * ptepack::kChunkBytes;  // three chunks of zeros
  std::stop_source source;
  ptepack::StreamOptions options;
  options.stop = source.get_token();
  {
    OutputFile file(dir / "running", "running");
    CHECK_NOTHROW(ptepack::write_content(file, content, options, nullptr));  // not asked
  }
  CHECK(std::filesystem::file_size(dir / "running") == content.size);
  source.request_stop();
  OutputFile file(dir / "stopped", "stopped");
  try {
    (void)ptepack::write_content(file, content, options, nullptr);
    FAIL("a stopped write went on");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
    CHECK(std::string(e.what()) == "stopped: write stopped");
  }
  CHECK(std::filesystem::file_size(dir / "stopped") == 0);
}
