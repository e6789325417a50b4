// A flat hash set of string views, for sets of hundreds of thousands of names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace ptepack::detail {

// Open addressing in one array of 16-byte slots (linear probing, power-of-two
// size, at most half full), each holding the view and 32 bits of its hash. A
// node-based set pays a cache miss per node on a large set; here a lookup
// touches one or two neighbouring slots. The strings viewed must outlive the
// set; each is shorter than 4 GiB (a program's names: a program is at most
// 1 GiB). No erase: the validator only adds and asks.
class ViewSet {
 public:
  // Room for `count` names without growing.
  void reserve(size_t count) {
    size_t want = 16;
    while (want < 2 * count) want *= 2;
    if (want > slots_.size()) rehash(want);
  }

  // Adds `name`; true when it was not there yet. Throws std::length_error for
  // a name of 4 GiB or more.
  bool insert(std::string_view name) {
    if (name.size() > UINT32_MAX) throw std::length_error("ViewSet: name of 4 GiB or more");
    if (2 * (size_ + 1) > slots_.size()) rehash(slots_.empty() ? 16 : 2 * slots_.size());
    const uint64_t h = hash_of(name);
    Slot& slot = slots_[find(name, h)];
    if (slot.tag != 0) return false;
    slot = {name.data(), static_cast<uint32_t>(name.size()), tag_of(h)};
    ++size_;
    return true;
  }

  [[nodiscard]] bool contains(std::string_view name) const {
    return !slots_.empty() && slots_[find(name, hash_of(name))].tag != 0;
  }

  [[nodiscard]] size_t size() const { return size_; }

  // fn(std::string_view) for every name, in no particular order.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const auto& slot : slots_) {
      if (slot.tag != 0) fn(std::string_view(slot.data, slot.size));
    }
  }

 private:
  struct Slot {
    const char* data = nullptr;
    uint32_t size = 0;
    uint32_t tag = 0;  // the hash's high bits with the lowest set; 0: free
  };

  static uint64_t hash_of(std::string_view name) { return std::hash<std::string_view>{}(name); }
  static uint32_t tag_of(uint64_t h) { return static_cast<uint32_t>(h >> 32) | 1u; }

  // The slot holding `name`, or the free slot where it would go.
  [[nodiscard]] size_t find(std::string_view name, uint64_t h) const {
    const size_t mask = slots_.size() - 1;
    const uint32_t tag = tag_of(h);
    for (size_t i = static_cast<size_t>(h) & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.tag == 0) return i;
      if (slot.tag == tag && slot.size == name.size() &&
          (name.empty() || std::memcmp(slot.data, name.data(), name.size()) == 0)) {
        return i;
      }
    }
  }

  void rehash(size_t count) {
    std::vector<Slot> old(count);
    old.swap(slots_);
    for (const auto& slot : old) {
      if (slot.tag == 0) continue;
      const std::string_view name(slot.data, slot.size);
      slots_[find(name, hash_of(name))] = slot;
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace ptepack::detail
