// Streaming writer: pieces copied in bounded chunks, digests computed on the way.
#include "ptepack/packing/file_content.h"

#include <algorithm>

#include "ptepack/formats/zip.h"
#include "ptepack/hash/parallel_hash.h"
#include "ptepack/io/pipelined_writer.h"

namespace ptepack {
namespace {

// Feeds the bytes of [begin, end) of the file, in order, to sink(offset, span),
// writing them to `out` on the way: tensor data through the pipelined writer
// (the write of one chunk overlaps reading and hashing the next), headers
// directly.
template <typename Sink>
void stream_slice(OutputFile& out, const FileContent& content, uint64_t begin, uint64_t end,
                  Progress* progress, Sink&& sink) {
  PipelinedWriter writer(out, 3, kChunkBytes);
  static const std::vector<uint8_t> zeros(64 * 1024, 0);
  auto emit_zeros = [&](uint64_t from, uint64_t to) {
    while (from < to) {
      auto n = std::min<uint64_t>(to - from, zeros.size());
      sink(from, std::span<const uint8_t>(zeros.data(), static_cast<size_t>(n)));
      from += n;
    }
  };
  uint64_t cursor = begin;
  for (const auto& piece : content.pieces) {
    uint64_t p_begin = piece.offset;
    uint64_t p_end = piece.offset + piece.size();
    if (p_end <= begin || p_begin >= end) continue;
    uint64_t from = std::max(p_begin, begin);
    uint64_t to = std::min(p_end, end);
    emit_zeros(cursor, from);
    if (piece.source.file) {
      uint64_t source_offset = piece.source.offset + (from - p_begin);
      for (uint64_t at = from; at < to;) {
        auto buffer = writer.acquire();
        auto n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), to - at));
        auto chunk = buffer.first(n);
        piece.source.file->read_at(source_offset + (at - from), chunk);
        sink(at, std::span<const uint8_t>(chunk));
        writer.submit(at, n);
        if (progress != nullptr) progress->add_written(n);
        at += n;
      }
    } else {
      std::span<const uint8_t> bytes(
          reinterpret_cast<const uint8_t*>(piece.bytes.data()) + (from - p_begin),
          static_cast<size_t>(to - from));
      out.write_at(from, bytes);
      sink(from, bytes);
    }
    cursor = to;
  }
  emit_zeros(cursor, end);
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
  StreamResult result;
  constexpr uint64_t kMinSlice = 64ULL << 20;
  unsigned slices = options.sha256 ? 1 : options.jobs;
  slices = static_cast<unsigned>(
      std::max<uint64_t>(1, std::min<uint64_t>(slices, content.size / kMinSlice)));
  std::vector<uint64_t> bounds;
  for (unsigned s = 0; s <= slices; ++s) bounds.push_back(content.size * s / slices);
  std::vector<uint32_t> slice_crc(slices, 0);
  Sha256 hasher;
  parallel_for(slices, slices, [&](size_t s) {
    uint32_t crc = 0;
    stream_slice(out, content, bounds[s], bounds[s + 1], progress,
                 [&](uint64_t offset, std::span<const uint8_t> bytes) {
                   if (options.sha256) hasher.update(bytes);
                   if (options.crc) crc = crc_update_in_range(crc, offset, bytes, *options.crc);
                 });
    slice_crc[s] = crc;
  });
  if (options.crc) {
    // Combine slice CRCs, each covering its slice's overlap with the crc range.
    uint32_t crc = 0;
    for (unsigned s = 0; s < slices; ++s) {
      uint64_t from = std::max(bounds[s], options.crc->first);
      uint64_t to = std::min(bounds[s + 1], options.crc->second);
      if (from >= to) continue;
      crc = zip::crc32_combine(crc, slice_crc[s], to - from);
    }
    result.crc32 = crc;
  }
  if (options.sha256) result.sha256 = hasher.finish();
  return result;
}

}  // namespace ptepack
