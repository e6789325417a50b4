// pread-based input files.
#include "ptepack/io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/checked.h"
#include "ptepack/base/error.h"

namespace ptepack {

std::shared_ptr<const InputFile> InputFile::open(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO or device must not wait for a writer; only regular
  // files pass the check below, and reads of those never block on it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {  // a socket: ENXIO
      fail(ErrorCode::io, "{}: not a regular file", path.string());
    }
    fail(ErrorCode::io, "{}: cannot open: {}", path.string(), std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(ErrorCode::io, "{}: cannot stat: {}", path.string(), std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorCode::io, "{}: not a regular file", path.string());
  }
  // Sequential access hint: tensors are read front to back in large pieces.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::shared_ptr<const InputFile>(
      new InputFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

InputFile::InputFile(std::filesystem::path path, int fd, uint64_t size)
    : path_(std::move(path)), name_(path_.string()), fd_(fd), size_(size) {}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::shared_ptr<const InputFile> InputFile::compose(std::string name, ComposedContent content) {
  uint64_t end = content.head.size();
  for (const auto& [offset, range] : content.pieces) {
    auto piece_end = checked_add(offset, range.size);
    if (offset < end || !piece_end || *piece_end > content.size || range.file == nullptr) {
      fail(ErrorCode::internal, "{}: composed piece at offset {} overlaps or runs past the end",
           name, offset);
    }
    end = *piece_end;
  }
  if (content.head.size() > content.size) {
    fail(ErrorCode::internal, "{}: composed head is larger than the file", name);
  }
  auto file = std::shared_ptr<InputFile>(new InputFile(name, -1, content.size));
  file->composed_ = std::make_shared<const ComposedContent>(std::move(content));
  return file;
}

void InputFile::read_composed(uint64_t offset, std::span<uint8_t> out) const {
  const ComposedContent& c = *composed_;
  std::fill(out.begin(), out.end(), uint8_t{0});
  const uint64_t end = offset + out.size();
  if (offset < c.head.size()) {
    const uint64_t n = std::min<uint64_t>(c.head.size(), end) - offset;
    std::memcpy(out.data(), c.head.data() + offset, static_cast<size_t>(n));
  }
  // The first piece that ends after `offset`, then every piece that starts before `end`.
  auto it = std::upper_bound(
      c.pieces.begin(), c.pieces.end(), offset,
      [](uint64_t at, const auto& piece) { return at < piece.first + piece.second.size; });
  for (; it != c.pieces.end() && it->first < end; ++it) {
    const uint64_t from = std::max(offset, it->first);
    const uint64_t to = std::min(end, it->first + it->second.size);
    if (from >= to) continue;
    it->second.file->read_at(it->second.offset + (from - it->first),
                             out.subspan(static_cast<size_t>(from - offset),
                                         static_cast<size_t>(to - from)));
  }
}

bool InputFile::source_of(uint64_t offset, uint64_t size, ByteRange& out) const {
  if (!composed_) return false;
  const auto& pieces = composed_->pieces;
  auto it = std::upper_bound(pieces.begin(), pieces.end(), offset,
                             [](uint64_t at, const auto& piece) { return at < piece.first; });
  if (it == pieces.begin()) return false;
  --it;
  if (offset < it->first || !range_within(offset - it->first, size, it->second.size)) return false;
  out = ByteRange{it->second.file, it->second.offset + (offset - it->first), size};
  return true;
}

void InputFile::read_at(uint64_t offset, std::span<uint8_t> out) const {
  if (!range_within(offset, out.size(), size_)) {
    fail_input("{}: range at offset {} of {} bytes is past the end of the file ({} bytes)", name_,
               offset, out.size(), size_);
  }
  if (composed_) {
    read_composed(offset, out);
    return;
  }
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n =
        ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(ErrorCode::io, "{}: read failed at offset {}: {}", name_, offset + done,
           std::strerror(errno));
    }
    if (n == 0)
      fail(ErrorCode::io, "{}: file shrank while reading (offset {})", name_, offset + done);
    done += static_cast<size_t>(n);
  }
}

std::vector<uint8_t> InputFile::read_range(uint64_t offset, uint64_t size) const {
  if (!range_within(offset, size, size_)) {
    fail_input("{}: range at offset {} of {} bytes is past the end of the file ({} bytes)", name_,
               offset, size, size_);
  }
  std::vector<uint8_t> out(static_cast<size_t>(size));
  read_at(offset, out);
  return out;
}

}  // namespace ptepack
