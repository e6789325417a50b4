// Streaming writer: pieces copied in bounded chunks, digests computed on the way.
#include "core/file_content.h"

#include <algorithm>
#include <cstring>

#include "ptepack/base/error.h"
#include "containers/zip.h"
#include "hash/parallel_hash.h"
#include "io/pipelined_writer.h"

namespace ptepack {
namespace {

// A file larger than this is flushed to stable storage in the background
// every time this many more bytes are written (docs/performance.md, round 9):
// the flushes overlap producing the file, where one final fsync would wait
// for all of it. Smaller files are left to that fsync.
constexpr uint64_t kFlushEvery = uint64_t{32} << 20;

// Produces the bytes of the file in whole chunks, in order:
// each chunk is assembled in a buffer of the pipelined writer (headers copied,
// tensor data read, padding zeroed), given to sink(offset, bytes), then
// written in the background while the next chunk is assembled. Small tensors
// therefore cost one write per chunk, not one each.
template <typename Sink>
void stream_chunks(OutputFile& out, const FileContent& content, const std::stop_token& stop,
                   Progress* progress, Sink&& sink) {
  const uint64_t end = content.size;
  // A file of one chunk (most shards of a small cap) needs one buffer of its size.
  const bool one_chunk = end <= kChunkBytes;
  PipelinedWriter writer(out, one_chunk ? 1 : 3,
                         one_chunk ? std::max<size_t>(static_cast<size_t>(end), 1) : kChunkBytes,
                         end > kFlushEvery ? kFlushEvery : 0);
  const auto& pieces = content.pieces;
  size_t first = 0;  // first piece that ends after the current chunk's start
  for (uint64_t chunk_at = 0; chunk_at < end;) {
    if (stop.stop_requested()) fail(ErrorCode::io, "{}: write stopped", out.display_name());
    auto buffer = writer.acquire();
    auto chunk =
        buffer.first(static_cast<size_t>(std::min<uint64_t>(buffer.size(), end - chunk_at)));
    uint64_t chunk_end = chunk_at + chunk.size();
    uint64_t cursor = chunk_at;  // bytes before it are filled
    uint64_t data_bytes = 0;
    auto at = [&](uint64_t offset) { return chunk.data() + (offset - chunk_at); };
    while (first < pieces.size() && pieces[first].offset + pieces[first].size() <= chunk_at)
      ++first;
    for (size_t i = first; i < pieces.size() && pieces[i].offset < chunk_end; ++i) {
      const auto& piece = pieces[i];
      uint64_t from = std::max(piece.offset, chunk_at);
      uint64_t to = std::min(piece.offset + piece.size(), chunk_end);
      if (from >= to) continue;
      std::fill(at(cursor), at(from), uint8_t{0});
      auto n = static_cast<size_t>(to - from);
      if (piece.source.file) {
        piece.source.file->read_at(piece.source.offset + (from - piece.offset),
                                   std::span<uint8_t>(at(from), n));
        data_bytes += n;
      } else {
        std::memcpy(at(from), piece.held().data() + (from - piece.offset), n);
      }
      cursor = to;
    }
    std::fill(at(cursor), at(chunk_end), uint8_t{0});
    sink(chunk_at, std::span<const uint8_t>(chunk));
    writer.submit(chunk_at, chunk.size());
    if (progress != nullptr) progress->add_written(data_bytes);
    chunk_at = chunk_end;
  }
  writer.finish();
}

// CRC of the part of [offset, offset + bytes) inside the crc range.
uint32_t crc_update_in_range(uint32_t crc, uint64_t offset, std::span<const uint8_t> bytes,
                             const std::pair<uint64_t, uint64_t>& range) {
  uint64_t from = std::max(offset, range.first);
  uint64_t to = std::min(offset + bytes.size(), range.second);
  if (from >= to) return crc;
  return zip::crc32_update(
      crc, bytes.subspan(static_cast<size_t>(from - offset), static_cast<size_t>(to - from)));
}

}  // namespace

StreamResult write_content(OutputFile& out, const FileContent& content,
                           const StreamOptions& options, Progress* progress) {
  for (size_t i = 0; i < content.pieces.size(); ++i) {
    const auto& piece = content.pieces[i];
    bool fits = piece.offset <= content.size && piece.size() <= content.size - piece.offset;
    bool ordered =
        i == 0 || content.pieces[i - 1].offset + content.pieces[i - 1].size() <= piece.offset;
    if (!fits || !ordered) fail(ErrorCode::internal, "file content piece {} out of order", i);
  }
  // One stream per file: writers of one file serialise on its inode lock, and a
  // second one only spins on it (docs/performance.md).
  StreamResult result;
  Sha256 hasher;
  uint32_t crc = 0;
  stream_chunks(out, content, options.stop, progress,
                [&](uint64_t offset, std::span<const uint8_t> bytes) {
                  if (options.sha256) hasher.update(bytes);
                  if (options.crc) crc = crc_update_in_range(crc, offset, bytes, *options.crc);
                });
  if (options.crc) result.crc32 = crc;
  if (options.sha256) result.sha256 = hasher.finish();
  return result;
}

bool same_bytes(const FileContent& a, const FileContent& b) {
  if (a.size != b.size || a.pieces.size() != b.pieces.size()) return false;
  for (size_t i = 0; i < a.pieces.size(); ++i) {
    const auto& x = a.pieces[i];
    const auto& y = b.pieces[i];
    if (x.offset != y.offset || x.source.file != y.source.file) return false;
    if (x.source.file ? (x.source.offset != y.source.offset || x.source.size != y.source.size)
                      : x.held() != y.held()) {
      return false;
    }
  }
  return true;
}

}  // namespace ptepack
