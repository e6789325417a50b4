// libFuzzer target: the safetensors reader, and the writer's layout re-read for what it accepts.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "containers/safetensors.h"

namespace {

std::vector<uint8_t> bytes_of(const ptepack::ByteRange& range) {
  return range.file->read_range(range.offset, range.size);
}

// Rewrites an accepted file with the writer's layout (what pack does with its tensors): the
// writer must take everything the reader accepts, and its bytes must read back the same.
void check_rewrite(const ptepack::safetensors::File& original) {
  namespace st = ptepack::safetensors;
  using ptepack::fuzz::invariant_failed;
  std::vector<st::Entry> entries;
  for (const auto& [key, tensor] : original.tensors) {
    entries.push_back({key, tensor.dtype, tensor.shape, tensor.bytes.size});
  }
  st::Layout layout;
  try {
    layout = st::plan_file(entries, original.metadata);
  } catch (const ptepack::Error& e) {
    invariant_failed(std::string("writer rejects an accepted safetensors file: ") + e.what());
  }
  std::string bytes = layout.head;
  for (const auto& [key, tensor] : original.tensors) {
    auto data = bytes_of(tensor.bytes);
    bytes.append(data.begin(), data.end());
  }
  if (bytes.size() != layout.file_size) invariant_failed("writer layout size disagrees");

  static ptepack::fuzz::MemoryFile rewritten("rewritten.safetensors");
  rewritten.assign(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  st::File again;
  try {
    again = st::read(ptepack::InputFile::open(rewritten.path()));
  } catch (const ptepack::Error& e) {
    invariant_failed(std::string("rewritten safetensors does not read back: ") + e.what());
  }
  if (again.metadata != original.metadata || again.tensors.size() != original.tensors.size()) {
    invariant_failed("rewritten safetensors differs in metadata or keys");
  }
  for (const auto& [key, tensor] : original.tensors) {
    auto it = again.tensors.find(key);
    if (it == again.tensors.end() || it->second.dtype != tensor.dtype ||
        it->second.shape != tensor.shape || bytes_of(it->second.bytes) != bytes_of(tensor.bytes)) {
      invariant_failed("rewritten safetensors differs in a tensor");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ptepack::fuzz::MemoryFile input("fuzz.safetensors");
  input.assign(data, size);
  ptepack::safetensors::File file;
  try {
    file = ptepack::safetensors::read(ptepack::InputFile::open(input.path()));
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
    return 0;
  }
  ptepack::fuzz::check_ranges_inside(file.tensors, "safetensors");
  check_rewrite(file);
  return 0;
}
