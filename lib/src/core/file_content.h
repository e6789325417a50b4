// A planned output file as positioned pieces, and the streaming writer that produces it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "ptepack/hash/sha256.h"
#include "ptepack/io/input_file.h"
#include "ptepack/io/output_file.h"
#include "ptepack/io/progress.h"

namespace ptepack {

// Bytes at a file offset: either held in memory (headers) or a range of an input
// file (tensor data). Gaps between pieces are zero padding.
struct Piece {
  uint64_t offset = 0;
  std::string bytes;  // used when source.file and borrowed are null
  ByteRange source;
  // Bytes held by the caller for the whole write (a large program), not copied.
  std::string_view borrowed{};
  [[nodiscard]] std::string_view held() const {
    return borrowed.data() != nullptr ? borrowed : std::string_view(bytes);
  }
  [[nodiscard]] uint64_t size() const { return source.file ? source.size : held().size(); }
};

struct FileContent {
  std::vector<Piece> pieces;  // sorted by offset, non-overlapping
  uint64_t size = 0;
};

// True when both give the same bytes from the same sources: the same size
// and pieces, each at the same offset with the same held bytes or the same
// range of the same file.
[[nodiscard]] bool same_bytes(const FileContent& a, const FileContent& b);

struct StreamOptions {
  bool sha256 = false;                               // digest of the whole file
  std::optional<std::pair<uint64_t, uint64_t>> crc;  // CRC-32 of [begin, end)
  std::stop_token stop;  // once stop is requested, the next chunk throws (the file is abandoned)
};

struct StreamResult {
  Digest sha256{};
  uint32_t crc32 = 0;
};

// Writes the file's bytes [0, content.size) into `out` in whole chunks (pieces
// copied, gaps written as zeros): one thread assembles chunks, one writes them.
// Digest and CRC cover exactly those bytes;
// the caller patches headers, then finish()es. Pieces must be sorted and must
// not overlap (checked: ErrorCode::internal). A stop requested through
// options.stop fails the write before its next chunk (ErrorCode::io).
StreamResult write_content(OutputFile& out, const FileContent& content,
                           const StreamOptions& options, Progress* progress);

}  // namespace ptepack
