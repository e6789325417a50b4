// safetensors: the strict reader, the sharded-set index reader, and the deterministic file layout.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ptepack/io/input_file.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack::safetensors {

struct File {
  TensorTable tensors;                          // key -> dtype/shape/absolute ByteRange
  std::map<std::string, std::string> metadata;  // "__metadata__" (string -> string only)
  uint64_t data_start = 0;                      // absolute offset of the data section
};

// Parses the safetensors stored at [offset, offset + size) of `file` (a whole file, or a member of
// a .ptn ZIP). `context` names it in messages (e.g. "model.ptn:program.safetensors"). Rejects, with
// ErrorCode::invalid_input and "<context>: ...", every header that is not exactly: a length within
// the range and Limits::max_header_bytes, one UTF-8 JSON object without duplicate keys whose
// entries are {dtype, shape, data_offsets} with a supported dtype, consistent byte lengths, and
// offsets tiling the data section exactly; plus an optional "__metadata__" object of strings.
File read(const InputFilePtr& file, uint64_t offset, uint64_t size, const std::string& context);
File read(const InputFilePtr& file);  // whole file, context = file name

// Reads a sharded set: {"metadata": {...}, "weight_map": {key: "shard file"}}. Shard names resolve
// relative to the index's directory and must stay inside it (symlinks included). Each shard is read
// once and must hold exactly the keys the weight_map assigns to it. Returns the union.
TensorTable read_index(const std::filesystem::path& index_path);

struct Entry {
  std::string key;
  DType dtype = DType::BYTE;
  Shape shape;
  uint64_t nbytes = 0;
};

struct Layout {
  std::string head;          // 8-byte length + JSON header padded with spaces to a multiple of 8
  uint64_t header_size = 0;  // 8 + JSON length, before the padding
  std::vector<uint64_t> data_offsets;  // absolute file offset of each entry, in the given order
  uint64_t file_size = 0;
};

// Tensors laid out contiguously in the given order (callers pass them sorted by key). JSON header:
// compact, "__metadata__" first and only when metadata is non-empty, then the tensor keys in sorted
// order, each as {"dtype","shape","data_offsets"}. Deterministic. Rejects (invalid_input) entries
// the reader would reject: empty, overlong, duplicate or reserved keys, keys that are not UTF-8,
// nbytes that disagree with dtype and shape.
Layout plan_file(const std::vector<Entry>& entries,
                 const std::map<std::string, std::string>& metadata);

// Exact JSON bytes of one header member `"key":{...}` with these data offsets (no comma);
// throws like plan_file for a key that is not valid UTF-8. Without metadata, plan_file's
// header_size is 8 + 2 + the members' sizes + one comma between members: the shard
// planner relies on it.
uint64_t entry_json_size(std::string_view key, DType dtype, const Shape& shape, uint64_t begin,
                         uint64_t end);

// The standard index file text ({"metadata": {"total_size": N}, "weight_map": {...}}),
// pretty-printed with 2-space indent, keys sorted, trailing newline.
// `weight_map` is sorted by key, each key once. Errors: invalid_input for a
// key or file name that is not valid UTF-8.
std::string index_json(
    uint64_t total_size,
    const std::vector<std::pair<std::string_view, std::string_view>>& weight_map);

}  // namespace ptepack::safetensors
