// Storage groups: the deduplicated units the writers store, one per unique content or state key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ptepack/hash/sha256.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack {

// A final key with its data and content digest.
struct StoredTensor {
  std::string key;
  TensorData data;
  Digest sha256{};
  bool is_mutable = false;
};

// Keys whose bytes are stored once. keys[0] (the smallest, bytewise) is the owner.
struct StorageGroup {
  std::vector<size_t> members;  // indices into the tensor list, sorted by key
  uint64_t nbytes = 0;
  bool is_mutable = false;
};

enum class DedupRule {
  dtype_shape_bytes,  // .ptn and safetensors: identical dtype, shape and bytes
  bytes,              // .ptd: identical bytes; each key keeps its own layout
};

// Groups tensors (sorted by key) by the rule; mutable tensors always get their
// own group. Groups are returned ordered by their sorted key lists compared
// as byte strings, i.e. by owner key.
[[nodiscard]] std::vector<StorageGroup> group_tensors(const std::vector<StoredTensor>& tensors,
                                                      DedupRule rule);

}  // namespace ptepack
