// Parallel range hashing: distinct ranges, biggest first, one bounded buffer per task.
#include "hash/parallel_hash.h"
#include "base/parallel.h"

#include "ptepack/base/error.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

namespace ptepack {

std::vector<Digest> hash_ranges(const std::vector<ByteRange>& ranges, unsigned jobs,
                                Progress* progress) {
  using RangeId = std::tuple<const InputFile*, uint64_t, uint64_t>;
  std::map<RangeId, size_t> distinct_index;
  std::vector<size_t> slot_of(ranges.size());
  std::vector<size_t> distinct;  // index into ranges of each distinct range
  for (size_t i = 0; i < ranges.size(); ++i) {
    RangeId id{ranges[i].file.get(), ranges[i].offset, ranges[i].size};
    auto [it, fresh] = distinct_index.emplace(id, distinct.size());
    if (fresh) distinct.push_back(i);
    slot_of[i] = it->second;
  }
  std::vector<size_t> order(distinct.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ranges[distinct[a]].size > ranges[distinct[b]].size;
  });
  std::vector<Digest> digests(distinct.size());
  parallel_for(order.size(), effective_jobs(jobs), [&](size_t n) {
    size_t slot = order[n];
    const auto& range = ranges[distinct[slot]];
    auto buffer = chunk_buffer(range.size, kHashChunkBytes);
    Sha256 hasher;
    for_each_chunk(range, buffer, [&](std::span<const uint8_t> chunk) {
      hasher.update(chunk);
      if (progress != nullptr) progress->add_hashed(chunk.size());
    });
    digests[slot] = hasher.finish();
  });
  std::vector<Digest> out(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) out[i] = digests[slot_of[i]];
  return out;
}

void RangeDigests::add(const ByteRange& range) {
  const Id id{range.file.get(), range.offset, range.size};
  if (done_.count(id)) return;
  // A range of a composed file (a merged program) whose source range is
  // already hashed has that digest: never hash the same bytes twice.
  ByteRange source;
  if (range.file->source_of(range.offset, range.size, source)) {
    auto it = done_.find(Id{source.file.get(), source.offset, source.size});
    if (it != done_.end()) {
      done_.emplace(id, it->second);
      return;
    }
  }
  pending_.emplace(id, range);
}

void RangeDigests::set(const ByteRange& range, const Digest& digest) {
  const Id id{range.file.get(), range.offset, range.size};
  pending_.erase(id);
  done_[id] = digest;
}

std::vector<ByteRange> RangeDigests::pending() const {
  std::vector<ByteRange> ranges;
  ranges.reserve(pending_.size());
  for (const auto& [id, range] : pending_) ranges.push_back(range);
  return ranges;
}

uint64_t RangeDigests::distinct_bytes() const {
  uint64_t total = 0;
  for (const auto& [id, range] : pending_) total += range.size;
  return total;
}

void RangeDigests::compute(unsigned jobs, Progress* progress) {
  auto digests = hash_ranges(pending(), jobs, progress);
  size_t i = 0;
  for (const auto& [id, range] : pending_) done_.emplace(id, digests[i++]);
  pending_.clear();
}

const Digest& RangeDigests::of(const ByteRange& range) const {
  auto it = done_.find(Id{range.file.get(), range.offset, range.size});
  if (it == done_.end()) fail(ErrorCode::internal, "digest of an unhashed range requested");
  return it->second;
}

}  // namespace ptepack
