// What dump collects from an artifact, shared by its text and JSON renderers.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/text_wrap.h"
#include "pte/dump_pte.h"
#include "ptepack/artifact/artifact.h"
#include "ptepack/dump/dump.h"
#include "graph/program_keys.h"

namespace ptepack::detail {

using ordered = nlohmann::json;

// One key of the artifact; names point into the artifact and its manifest (a row is a few
// words, so a million keys cost tens of MB, not hundreds).
struct KeyRow {
  const std::string* key = nullptr;
  const TensorData* data = nullptr;
  const Digest* manifest_sha256 = nullptr;  // else the digest computed at the same index
  std::string_view shard;
  std::string_view alias_of;
  bool is_mutable = false;
  bool referenced = true;
};

// Output in chunks: a dump is written as it is rendered, never held whole. With
// a width, every line longer than it is wrapped (text_wrap.h).
class Sink {
 public:
  Sink(const TextOut& out, size_t width) : out_(out), width_(width) {}
  void add(std::string_view text) {
    if (width_ == 0) {
      buffer_ += text;
    } else {
      pending_ += text;
      size_t start = 0;
      for (size_t end = pending_.find('\n'); end != std::string::npos;
           end = pending_.find('\n', start)) {
        buffer_ += detail::wrap_line(std::string_view(pending_).substr(start, end - start), width_);
        start = end + 1;
      }
      pending_.erase(0, start);
    }
    if (buffer_.size() >= kChunk) emit();
  }
  void flush() {
    if (!pending_.empty()) buffer_ += detail::wrap_line(pending_, width_);
    pending_.clear();
    emit();
  }

 private:
  void emit() {
    if (!buffer_.empty()) out_(buffer_);
    buffer_.clear();
  }

  static constexpr size_t kChunk = 1 << 20;
  const TextOut& out_;
  size_t width_;
  std::string buffer_;
  std::string pending_;  // the start of a line not yet complete
};

struct Tally {
  size_t keys = 0;
  uint64_t bytes = 0;
};

struct Breakdown {
  std::map<std::string, Tally> by_method;
  std::map<std::string, Tally> by_dtype;
  std::map<std::string, Tally> by_shard;
  std::vector<const KeyRow*> largest;
};

// Everything the renderers show, collected once.
struct DumpContext {
  const Artifact& artifact;
  const DumpOptions& options;
  const ProgramKeys& keys;
  const std::vector<std::string_view>& state;  // every state key, sorted, each once
  std::vector<KeyRow> rows;                    // the rows shown, in --sort order
  size_t total_keys = 0;                       // rows before --key, --method, --shard
  std::vector<Digest> digests;                 // of the rows shown, when hashed
  ProgramDump programs;                        // the .pte programs' sections
  uint64_t referenced_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t unreferenced_bytes = 0;
  uint64_t unreferenced_keys = 0;
  uint64_t saved = 0;
  // .pte programs: the methods that read each key (EXTERNAL tensors, and named
  // data their delegates name), for --summary's section by method.
  std::map<std::string, std::vector<std::string>, std::less<>> key_methods = {};

  // A row's SHA-256 as hex: the manifest's, or computed; empty when there is
  // none (a key the manifest does not list, or --no-hash).
  [[nodiscard]] std::string sha256_of(size_t i) const;
};

[[nodiscard]] std::string shape_text(const Shape& shape);
[[nodiscard]] std::string file_of(const KeyRow& r);
[[nodiscard]] Breakdown breakdown_of(
    const std::vector<KeyRow>& rows, const ProgramKeys& keys, size_t top,
    const std::map<std::string, std::vector<std::string>, std::less<>>& key_methods);

void render_json(const DumpContext& c, Sink& out);
void render_text(const DumpContext& c, Sink& out);

}  // namespace ptepack::detail
