// pread-based input files.
#include "ptepack/io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ptepack/base/checked.h"
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

InputFile::~InputFile() { ::close(fd_); }

void InputFile::read_at(uint64_t offset, std::span<uint8_t> out) const {
  if (!range_within(offset, out.size(), size_)) {
    fail_input("{}: range at offset {} of {} bytes is past the end of the file ({} bytes)", name_,
               offset, out.size(), size_);
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
