// Shared pieces of the fuzz targets: fuzz inputs as files, and the invariant checks that abort.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/checked.h"
#include "ptepack/base/error.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack::fuzz {

// A bug, not a rejected input: print why and abort, so libFuzzer (or the replay driver under
// CTest) records a crash with this message.
[[noreturn]] inline void invariant_failed(std::string_view what) {
  std::fprintf(stderr, "ptepack fuzz invariant failed: %.*s\n", static_cast<int>(what.size()),
               what.data());
  std::abort();
}

// Readers report malformed input as ptepack::Error; ErrorCode::internal means ptepack itself is
// wrong, so it is a finding even though the type is the expected one.
inline void expect_input_error(const Error& error) {
  if (error.code() == ErrorCode::internal) {
    invariant_failed(std::string("internal error from a reader: ") + error.what());
  }
}

// Writes a whole buffer at offset 0 of fd (a memfd or a freshly truncated file).
inline void write_all(int fd, const uint8_t* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) invariant_failed(std::string("pwrite: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

// An in-memory file (memfd) reached through /proc/self/fd, so readers that want a path or an
// InputFile see the fuzz input as a regular file without a disk write per execution.
class MemoryFile {
 public:
  explicit MemoryFile(const char* name) {
    fd_ = ::memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) invariant_failed(std::string("memfd_create: ") + std::strerror(errno));
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

  void assign(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) invariant_failed("ftruncate of the memfd failed");
    write_all(fd_, data, size);
  }

 private:
  int fd_ = -1;
  std::filesystem::path path_;
};

// Replaces the contents of a regular file in a scratch directory.
inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) invariant_failed("cannot create " + path.string() + ": " + std::strerror(errno));
  write_all(fd, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ::close(fd);
}

// A private directory for targets that need real files side by side; removed at exit.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/ptepack-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) invariant_failed("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Every tensor a reader returns must lie inside the file it names: consumers read these ranges
// without checking them again.
inline void check_ranges_inside(const TensorTable& table, std::string_view what) {
  for (const auto& [key, tensor] : table) {
    const ByteRange& range = tensor.bytes;
    if (range.file == nullptr) invariant_failed(std::string(what) + ": tensor without a file");
    if (!range_within(range.offset, range.size, range.file->size())) {
      invariant_failed(std::string(what) + ": tensor range outside its file");
    }
    auto expected = byte_size(tensor.dtype, tensor.shape);
    if (!expected || *expected != range.size) {
      invariant_failed(std::string(what) + ": tensor byte size disagrees with dtype and shape");
    }
  }
}

}  // namespace ptepack::fuzz
