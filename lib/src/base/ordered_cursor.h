// Lookups in key order in an ordered map or set: one forward walk, no search.
#pragma once

#include <iterator>

namespace ptepack {

// For a std::map or std::set whose keys are asked for in ascending order
// (each key asked is not smaller than the one before): find() advances one
// iterator, so a whole pass costs one walk of the container instead of a
// search per key, each comparing long common prefixes.
template <typename Container>
class OrderedCursor {
 public:
  using const_iterator = typename Container::const_iterator;

  explicit OrderedCursor(const Container& container)
      : end_(container.end()), at_(container.begin()) {}

  // The entry with `key`, or end().
  template <typename Key>
  [[nodiscard]] const_iterator find(const Key& key) {
    while (at_ != end_ && key_of(at_) < key) ++at_;
    return at_ != end_ && key_of(at_) == key ? at_ : end_;
  }
  template <typename Key>
  [[nodiscard]] bool contains(const Key& key) {
    return find(key) != end_;
  }
  [[nodiscard]] const_iterator end() const { return end_; }

 private:
  static const auto& key_of(const_iterator it) {
    if constexpr (requires { it->first; }) {
      return it->first;
    } else {
      return *it;
    }
  }

  const_iterator end_;
  const_iterator at_;
};

}  // namespace ptepack
