// Plain tensor records: where a tensor's bytes live and how to read them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ptepack/base/limits.h"
#include "ptepack/hash/sha256.h"
#include "ptepack/io/input_file.h"
#include "ptepack/tensors/dtype.h"

namespace ptepack {

using Shape = std::vector<int64_t>;

// A tensor as stored in some input: dtype and shape of its data source, and the
// byte range holding its bytes (never loaded whole).
struct TensorData {
  DType dtype = DType::BYTE;
  Shape shape;
  ByteRange bytes;
  // Memory order of the dimensions (outer to inner); empty means contiguous
  // (0, 1, ..., rank-1). Only .ptd layouts and .pte tensors carry one.
  std::vector<uint8_t> dim_order = {};
  // Opaque bytes without a tensor layout (delegate named data): dtype BYTE,
  // shape [size], and a .ptd entry written without TensorLayout.
  bool opaque = false;
  // Digest the source promises for these bytes (a directory's manifest),
  // checked when the bytes are hashed so corrupt inputs are never repacked.
  std::optional<Digest> expected_sha256 = std::nullopt;
};

// key -> tensor, ordered by key bytes (std::string compares bytewise).
using TensorTable = std::map<std::string, TensorData>;

// A hashed index of a table's keys for many lookups: the ordered map compares
// keys' long common prefixes at every step. The table must outlive it and keep
// its keys; entries are numbered in key order. One flat array of 8-byte slots
// (an entry's number and 32 bits of its key's hash, linear probing, at most
// half full): a node per key would cost a heap block and a cache miss each.
class TensorLookup {
 public:
  static constexpr size_t npos = SIZE_MAX;
  explicit TensorLookup(const TensorTable& table);
  // Entries of one or more tables, in ascending key order, each key once.
  explicit TensorLookup(std::vector<const TensorTable::value_type*> entries);
  // The entry's number, or npos.
  [[nodiscard]] size_t find(std::string_view key) const;
  [[nodiscard]] const TensorTable::value_type& entry(size_t i) const { return *entries_[i]; }
  // The entry's data, or null.
  [[nodiscard]] const TensorData* data(std::string_view key) const;
  [[nodiscard]] size_t size() const { return entries_.size(); }

 private:
  void build();

  std::vector<const TensorTable::value_type*> entries_;
  std::vector<uint64_t> slots_;  // tag << 32 | (number + 1); 0 when free
};

// `order` as TensorData::dim_order holds it: empty when it is the identity.
[[nodiscard]] std::vector<uint8_t> normalized_dim_order(const std::vector<uint8_t>& order);

// Number of elements, or nullopt on a negative dim or overflow.
[[nodiscard]] std::optional<uint64_t> element_count(const Shape& shape);
// element_count * element_size, or nullopt on overflow.
[[nodiscard]] std::optional<uint64_t> byte_size(DType dtype, const Shape& shape);

// Bytes without a tensor layout (delegate named data): dtype BYTE, shape
// [size], opaque.
[[nodiscard]] TensorData opaque_tensor(const ByteRange& bytes);

}  // namespace ptepack
