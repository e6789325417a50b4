// Helpers shared by the unit tests: fixture paths, temp dirs, small programs.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

#include "ptepack/formats/artifact.h"

namespace ptepack::test {

inline std::filesystem::path data_path(const std::string& name) {
  return std::filesystem::path(PTEPACK_TEST_DATA_DIR) / name;
}

// A fresh empty directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("ptepack-unit-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const {
    return path_ / name;
  }

 private:
  std::filesystem::path path_;
};

// A fresh directory on tmpfs (/dev/shm) when there is one, else under the
// system temp dir, removed on destruction: sweeps that write thousands of
// files (truncations, flips) and fsync them stay fast.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag = "scratch") {
    static int counter = 0;
    std::error_code error;
    const std::filesystem::path root =
        std::filesystem::is_directory("/dev/shm", error) && ::access("/dev/shm", W_OK) == 0
            ? std::filesystem::path("/dev/shm")
            : std::filesystem::temp_directory_path();
    path_ = root /
            ("ptepack-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const {
    return path_ / name;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace ptepack::test
