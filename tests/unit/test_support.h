// Helpers shared by the unit tests: fixture paths, temp dirs, small programs.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <map>
#include <random>
#include <stdexcept>
#include <string>

#include "ptepack/artifact/artifact.h"
#include "ptepack/containers/manifest.h"
#include "ptepack/core/storage.h"

namespace ptepack::test {

// A whole file's bytes (empty when it cannot be read).
inline std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every entry of a directory by name: a file's bytes, or "(directory)".
// Writes `bytes` to `path`, replacing it.
inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.good()) throw std::runtime_error("cannot write " + path.string());
}

inline std::map<std::string, std::string> directory_files(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    files.emplace(entry.path().filename().string(),
                  entry.is_directory() ? "(directory)" : file_bytes(entry.path()));
  }
  return files;
}

inline std::filesystem::path data_path(const std::string& name) {
  return std::filesystem::path(PTEPACK_TEST_DATA_DIR) / name;
}

// A stored tensor of `nbytes` BYTE elements whose SHA-256 is `fill` repeated: what the
// planner, the sharing sets and the reuse rule see, without bytes behind it.
inline StoredTensor stored_tensor(const std::string& key, uint64_t nbytes, uint8_t fill,
                                  bool is_mutable = false) {
  StoredTensor t;
  t.key = key;
  t.data.dtype = DType::BYTE;
  t.data.shape = {static_cast<int64_t>(nbytes)};
  t.data.bytes.size = nbytes;
  t.sha256.fill(fill);
  t.is_mutable = is_mutable;
  return t;
}

// OLD's manifest entry for a tensor of `nbytes` BYTE elements in `shard`, its SHA-256 `fill`
// repeated (stored_tensor's digest for the same fill).
inline ManifestTensor manifest_tensor(const std::string& shard, uint64_t nbytes, uint8_t fill,
                                      std::optional<std::string> alias_of = std::nullopt) {
  ManifestTensor t;
  t.shard = shard;
  t.sha256.fill(fill);
  t.nbytes = nbytes;
  t.dtype = DType::BYTE;
  t.shape = {static_cast<int64_t>(nbytes)};
  t.alias_of = std::move(alias_of);
  return t;
}

// A directory removed with everything in it on destruction.
class OwnedDir {
 public:
  ~OwnedDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  OwnedDir(const OwnedDir&) = delete;
  OwnedDir& operator=(const OwnedDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const {
    return path_ / name;
  }

 protected:
  // Makes `path` fresh and empty.
  explicit OwnedDir(std::filesystem::path path) : path_(std::move(path)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }

 private:
  std::filesystem::path path_;
};

// A fresh empty directory under the system temp dir.
class TempDir : public OwnedDir {
 public:
  TempDir() : OwnedDir(std::filesystem::temp_directory_path() / unique_name()) {}

 private:
  static std::string unique_name() {
    std::random_device rd;
    return "ptepack-unit-" + std::to_string(rd()) + std::to_string(rd());
  }
};

// A fresh directory on tmpfs (/dev/shm) when there is one, else under the
// system temp dir: sweeps that write thousands of files (truncations, flips)
// and fsync them stay fast.
class ScratchDir : public OwnedDir {
 public:
  explicit ScratchDir(const std::string& tag = "scratch") : OwnedDir(location(tag)) {}

 private:
  static std::filesystem::path location(const std::string& tag) {
    static int counter = 0;
    std::error_code error;
    const std::filesystem::path root =
        std::filesystem::is_directory("/dev/shm", error) && ::access("/dev/shm", W_OK) == 0
            ? std::filesystem::path("/dev/shm")
            : std::filesystem::temp_directory_path();
    return root /
           ("ptepack-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  }
};

// A small deterministic generator (xorshift64) for random models: the same
// seed gives the same model on every platform, unlike std::uniform_*.
class Xorshift {
 public:
  explicit Xorshift(uint64_t seed) : x_(seed) {}
  // A value in [0, bound).
  uint64_t operator()(uint64_t bound) {
    x_ ^= x_ << 13, x_ ^= x_ >> 7, x_ ^= x_ << 17;
    return x_ % bound;
  }

 private:
  uint64_t x_;
};

}  // namespace ptepack::test
