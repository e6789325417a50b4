// Read-only input files accessed by positioned reads, never loaded whole.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ptepack {

struct ByteRange;
struct ComposedContent;

// An open file read with pread in bounded pieces, so resident memory stays
// independent of file size. Shared by every tensor that lives in it.
//
// A composed file is a file that exists only as a layout: bytes held in memory
// at its start, then ranges of other files at given offsets, zeros between. It
// reads like any file (a program merged from several, read by the same reader
// as a file on disk) and never copies the ranges it is made of.
class InputFile {
 public:
  static std::shared_ptr<const InputFile> open(const std::filesystem::path& path);
  static std::shared_ptr<const InputFile> compose(std::string name, ComposedContent content);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] uint64_t size() const noexcept { return size_; }
  [[nodiscard]] int fd() const noexcept { return fd_; }

  // Reads exactly out.size() bytes at offset; throws invalid_input when the
  // range is outside the file and io on a read error.
  void read_at(uint64_t offset, std::span<uint8_t> out) const;
  // Reads a whole range into memory; callers bound `size` by a format limit.
  [[nodiscard]] std::vector<uint8_t> read_range(uint64_t offset, uint64_t size) const;

  // For a composed file: the range of the file a range of this one was composed
  // from, when it lies inside one piece (its digest is that range's). Otherwise
  // (and for a file on disk) false.
  [[nodiscard]] bool source_of(uint64_t offset, uint64_t size, ByteRange& out) const;

 private:
  InputFile(std::filesystem::path path, int fd, uint64_t size);
  void read_composed(uint64_t offset, std::span<uint8_t> out) const;
  std::filesystem::path path_;
  std::string name_;
  int fd_;
  uint64_t size_;
  std::shared_ptr<const ComposedContent> composed_;  // set for a composed file (fd_ = -1)
};

using InputFilePtr = std::shared_ptr<const InputFile>;

// A byte range of an input file: where a tensor's bytes live.
struct ByteRange {
  InputFilePtr file;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The layout of a composed file: `head` at offset 0, then each piece's bytes at
// its offset (ascending, not overlapping, after the head), zeros between;
// `size` bytes in all.
struct ComposedContent {
  std::string head;
  std::vector<std::pair<uint64_t, ByteRange>> pieces;
  uint64_t size = 0;
};

// Calls `sink` with consecutive chunks of at most `chunk` bytes of the range,
// reusing one buffer.
template <typename Sink>
void for_each_chunk(const ByteRange& range, std::vector<uint8_t>& buffer, Sink&& sink) {
  uint64_t done = 0;
  while (done < range.size) {
    uint64_t n = std::min<uint64_t>(buffer.size(), range.size - done);
    std::span<uint8_t> piece(buffer.data(), static_cast<size_t>(n));
    range.file->read_at(range.offset + done, piece);
    sink(std::span<const uint8_t>(piece));
    done += n;
  }
}

}  // namespace ptepack
