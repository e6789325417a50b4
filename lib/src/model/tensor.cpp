// Element and byte counts with overflow checks.
#include "ptepack/model/tensor.h"

#include "ptepack/base/checked.h"

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

TensorLookup::TensorLookup(const TensorTable& table) {
  entries_.reserve(table.size());
  numbers_.reserve(table.size());
  for (const auto& entry : table) {
    numbers_.emplace(entry.first, entries_.size());
    entries_.push_back(&entry);
  }
}

TensorLookup::TensorLookup(std::vector<const TensorTable::value_type*> entries)
    : entries_(std::move(entries)) {
  numbers_.reserve(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) numbers_.emplace(entries_[i]->first, i);
}

size_t TensorLookup::find(std::string_view key) const {
  auto it = numbers_.find(key);
  return it == numbers_.end() ? npos : it->second;
}

const TensorData* TensorLookup::data(std::string_view key) const {
  size_t i = find(key);
  return i == npos ? nullptr : &entries_[i]->second;
}

}  // namespace ptepack
