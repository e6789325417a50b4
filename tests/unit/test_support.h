// Helpers shared by the unit tests: fixture paths, temp dirs, small programs.
#pragma once

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

}  // namespace ptepack::test
