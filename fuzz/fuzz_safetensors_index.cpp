// libFuzzer target: the sharded safetensors index reader, with fixed valid shards beside it.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "containers/safetensors.h"

namespace {

namespace fs = std::filesystem;
namespace st = ptepack::safetensors;

// A small valid shard holding `entries` (zero bytes), written with the library's own layout.
void write_shard(const fs::path& path, const std::vector<st::Entry>& entries) {
  st::Layout layout = st::plan_file(entries, {});
  std::string bytes = layout.head;
  bytes.resize(layout.file_size, '\0');
  ptepack::fuzz::write_file(path, bytes);
}

// The fixed world every input's index is read in: index/ holds two shards, a shard in a
// subdirectory, and a symlink to a shard outside index/ (which the reader must refuse).
struct World {
  ptepack::fuzz::ScratchDir scratch;
  fs::path dir;
  fs::path index;
  World() {
    dir = scratch.path() / "index";
    fs::create_directories(dir / "sub");
    fs::create_directories(scratch.path() / "outside");
    using ptepack::DType;
    write_shard(dir / "model-00001-of-00002.safetensors",
                {{"a", DType::FLOAT, {2}, 8}, {"b", DType::LONG, {1}, 8}});
    write_shard(dir / "model-00002-of-00002.safetensors", {{"c", DType::BYTE, {3}, 3}});
    write_shard(dir / "sub" / "nested.safetensors", {{"d", DType::HALF, {2, 2}, 8}});
    write_shard(scratch.path() / "outside" / "escape.safetensors", {{"e", DType::BOOL, {1}, 1}});
    fs::create_symlink(scratch.path() / "outside" / "escape.safetensors",
                       dir / "outside.safetensors");
    index = dir / "model.safetensors.index.json";
    dir = fs::canonical(dir);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World world;
  ptepack::fuzz::write_file(world.index,
                            std::string_view(reinterpret_cast<const char*>(data), size));
  ptepack::TensorTable table;
  try {
    table = st::read_index(world.index);
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
    return 0;
  }
  ptepack::fuzz::check_ranges_inside(table, "safetensors index");
  const std::string inside = world.dir.string() + "/";
  for (const auto& [key, tensor] : table) {
    auto resolved = fs::canonical(tensor.bytes.file->path()).string();
    if (resolved.compare(0, inside.size(), inside) != 0) {
      ptepack::fuzz::invariant_failed("index read a shard outside its directory: " + resolved);
    }
  }
  return 0;
}
