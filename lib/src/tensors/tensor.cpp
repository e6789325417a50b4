// Element and byte counts with overflow checks.
#include "ptepack/tensors/tensor.h"

#include <functional>
#include <stdexcept>

#include "base/checked.h"

namespace ptepack {

std::optional<uint64_t> element_count(const Shape& shape) {
  uint64_t n = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    auto next = checked_mul(n, static_cast<uint64_t>(dim));
    if (!next) return std::nullopt;
    n = *next;
  }
  return n;
}

TensorData opaque_tensor(const ByteRange& bytes) {
  TensorData d;
  d.shape = {static_cast<int64_t>(bytes.size)};
  d.bytes = bytes;
  d.opaque = true;
  return d;
}

std::optional<uint64_t> byte_size(DType dtype, const Shape& shape) {
  auto n = element_count(shape);
  if (!n) return std::nullopt;
  return checked_mul(*n, element_size(dtype));
}

std::vector<uint8_t> normalized_dim_order(const std::vector<uint8_t>& order) {
  for (size_t d = 0; d < order.size(); ++d) {
    if (order[d] != d) return order;
  }
  return {};
}

namespace {

uint64_t key_hash(std::string_view key) { return std::hash<std::string_view>{}(key); }
uint64_t key_tag(uint64_t hash) { return (hash >> 32) << 32; }

}  // namespace

TensorLookup::TensorLookup(const TensorTable& table) {
  entries_.reserve(table.size());
  for (const auto& entry : table) entries_.push_back(&entry);
  build();
}

TensorLookup::TensorLookup(std::vector<const TensorTable::value_type*> entries)
    : entries_(std::move(entries)) {
  build();
}

void TensorLookup::build() {
  if (entries_.size() >= UINT32_MAX) throw std::length_error("TensorLookup: too many entries");
  size_t size = 16;
  while (size < 2 * entries_.size()) size *= 2;
  slots_.assign(size, 0);
  const size_t mask = size - 1;
  for (size_t n = 0; n < entries_.size(); ++n) {
    const uint64_t h = key_hash(entries_[n]->first);
    size_t i = static_cast<size_t>(h) & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;  // keys are unique: no compare needed
    slots_[i] = key_tag(h) | (n + 1);
  }
}

size_t TensorLookup::find(std::string_view key) const {
  const uint64_t h = key_hash(key);
  const uint64_t tag = key_tag(h);
  const size_t mask = slots_.size() - 1;
  for (size_t i = static_cast<size_t>(h) & mask;; i = (i + 1) & mask) {
    const uint64_t slot = slots_[i];
    if (slot == 0) return npos;
    const size_t n = static_cast<size_t>(slot & 0xffffffffU) - 1;
    if ((slot & ~uint64_t{0xffffffffU}) == tag && entries_[n]->first == key) return n;
  }
}

const TensorData* TensorLookup::data(std::string_view key) const {
  size_t i = find(key);
  return i == npos ? nullptr : &entries_[i]->second;
}

}  // namespace ptepack
