// libFuzzer target: the .ptd (FlatTensor) reader, and the writer's layout re-read for what it
// accepts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "containers/flat_tensor.h"

namespace {

std::vector<uint8_t> bytes_of(const ptepack::ByteRange& range) {
  return range.file->read_range(range.offset, range.size);
}

// Rewrites an accepted file with the writer's plan (shared segments stay shared, unused ones are
// dropped, as pack does): the plan must take what the reader accepts and read back the same.
void check_rewrite(const ptepack::ptd::File& original) {
  namespace ptd = ptepack::ptd;
  using ptepack::fuzz::invariant_failed;
  // Original byte range (offset, size) -> rewritten segment.
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> new_index;
  std::vector<uint64_t> sizes;
  std::vector<const ptepack::ByteRange*> contents;
  std::vector<ptd::Entry> entries;
  for (const auto& [key, tensor] : original.tensors) {
    auto [it, fresh] = new_index.emplace(std::pair(tensor.bytes.offset, tensor.bytes.size),
                                         static_cast<uint32_t>(sizes.size()));
    if (fresh) {
      sizes.push_back(tensor.bytes.size);
      contents.push_back(&tensor.bytes);
    }
    entries.push_back({key, tensor.dtype, tensor.shape, it->second});
  }
  ptd::Layout layout;
  try {
    layout = ptd::plan_file(entries, sizes);
  } catch (const ptepack::Error& e) {
    invariant_failed(std::string("writer rejects an accepted .ptd file: ") + e.what());
  }
  std::string bytes = layout.head;
  bytes.resize(layout.file_size, '\0');
  for (size_t s = 0; s < contents.size(); ++s) {
    auto data = bytes_of(*contents[s]);
    auto at = static_cast<std::ptrdiff_t>(layout.segment_offsets[s]);
    std::copy(data.begin(), data.end(), bytes.begin() + at);
  }

  static ptepack::fuzz::MemoryFile rewritten("rewritten.ptd");
  rewritten.assign(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ptd::File again;
  try {
    again = ptd::read_file(ptepack::InputFile::open(rewritten.path()));
  } catch (const ptepack::Error& e) {
    invariant_failed(std::string("rewritten .ptd does not read back: ") + e.what());
  }
  if (again.tensors.size() != original.tensors.size()) {
    invariant_failed("rewritten .ptd keys differ");
  }
  for (const auto& [key, tensor] : original.tensors) {
    auto it = again.tensors.find(key);
    if (it == again.tensors.end() || it->second.dtype != tensor.dtype ||
        it->second.shape != tensor.shape || bytes_of(it->second.bytes) != bytes_of(tensor.bytes)) {
      invariant_failed("rewritten .ptd differs in a tensor");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ptepack::fuzz::MemoryFile input("fuzz.ptd");
  input.assign(data, size);
  ptepack::ptd::File file;
  try {
    file = ptepack::ptd::read_file(ptepack::InputFile::open(input.path()));
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
    return 0;
  }
  ptepack::fuzz::check_ranges_inside(file.tensors, "ptd");
  for (const auto& segment : file.segments) {
    if (!ptepack::range_within(segment.offset, segment.size, static_cast<uint64_t>(size))) {
      ptepack::fuzz::invariant_failed("ptd segment outside the file");
    }
  }
  check_rewrite(file);
  return 0;
}
