// safetensors: the sharded index (`*.safetensors.index.json`) and its shards.
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "containers/safetensors_keys.h"
#include "ptepack/base/error.h"
#include "containers/safetensors.h"
#include "json/json_util.h"

namespace ptepack::safetensors {

using json = nlohmann::json;
using detail::check_key;

namespace {

// The directory an index's shards resolve against, and the resolution rules: a shard name is a
// relative path without '..' that, after following symlinks, stays inside that directory.
std::filesystem::path resolve_shard(const std::filesystem::path& base, const std::string& name,
                                    const std::string& key, const std::string& context) {
  namespace fs = std::filesystem;
  if (name.empty()) fail_input("{}: key {} maps to an empty shard name", context, shown_key(key));
  if (name.find('\0') != std::string::npos) {
    fail_input("{}: shard name {} of key {} contains a NUL byte", context, quote(name),
               shown_key(key));
  }
  fs::path relative(name);
  if (relative.has_root_path()) {
    fail_input("{}: shard {} of key {} is an absolute path", context, quote(name),
               shown_key(key));
  }
  for (const auto& part : relative) {
    if (part == "..") {
      fail_input("{}: shard {} of key {} has a '..' component", context, quote(name),
                 shown_key(key));
    }
  }
  std::error_code error;
  fs::path resolved = fs::weakly_canonical(base / relative, error);
  if (error) {
    fail(ErrorCode::io, "{}: cannot resolve shard {}: {}", context, quote(name),
         error.message());
  }
  auto [base_end, unused] =
      std::mismatch(base.begin(), base.end(), resolved.begin(), resolved.end());
  if (base_end != base.end() || resolved == base) {
    fail_input("{}: shard {} of key {} resolves to {}, not to a file inside the index's directory",
               context, quote(name), shown_key(key), resolved.string());
  }
  return resolved;
}

struct ShardKeys {
  std::string name;               // as the weight_map spells it (the first spelling seen)
  std::vector<std::string> keys;  // sorted: the weight_map object iterates in key order
};

}  // namespace

TensorTable read_index(const std::filesystem::path& index_path) {
  namespace fs = std::filesystem;
  const std::string context = index_path.string();
  auto index_file = InputFile::open(index_path);
  if (index_file->size() > Limits::max_header_bytes) {
    fail_input("{}: index of {} bytes exceeds the limit of {} bytes", context, index_file->size(),
               Limits::max_header_bytes);
  }
  std::vector<uint8_t> text = index_file->read_range(0, index_file->size());
  json root = parse_json_strict(
      std::string_view(reinterpret_cast<const char*>(text.data()), text.size()), context);
  if (!root.is_object()) fail_input("{}: index is not a JSON object", context);
  if (auto metadata = root.find("metadata"); metadata != root.end() && !metadata->is_object()) {
    fail_input("{}: \"metadata\" is not an object", context);
  }
  auto weight_map = root.find("weight_map");
  if (weight_map == root.end()) fail_input("{}: index has no \"weight_map\"", context);
  if (!weight_map->is_object()) fail_input("{}: \"weight_map\" is not an object", context);
  if (weight_map->size() > Limits::max_keys) {
    fail_input("{}: weight_map has more than {} keys", context, Limits::max_keys);
  }

  std::error_code error;
  fs::path base = fs::weakly_canonical(fs::absolute(index_path).parent_path(), error);
  if (error) fail(ErrorCode::io, "{}: cannot resolve its directory: {}", context, error.message());
  // Keyed by resolved path, so two spellings of one file still open and check it once.
  std::map<fs::path, ShardKeys> shards;
  for (const auto& [key, value] : weight_map->items()) {
    check_key(key, context);
    if (!value.is_string()) {
      fail_input("{}: weight_map value of {} is not a string", context, shown_key(key));
    }
    const auto& name = value.get_ref<const std::string&>();
    ShardKeys& shard = shards[resolve_shard(base, name, key, context)];
    if (shard.name.empty()) shard.name = name;
    shard.keys.push_back(key);
  }

  TensorTable out;
  for (auto& [path, shard] : shards) {
    if (std::error_code missing; !fs::exists(path, missing)) {
      fail(ErrorCode::io, "{}: shard {} (holding {}) does not exist: {}", context,
           quote(shard.name), shown_key(shard.keys.front()), path.string());
    }
    File file = read(InputFile::open(path));
    for (const std::string& key : shard.keys) {
      if (!file.tensors.contains(key)) {
        fail_input("{}: key {} is mapped to shard {}, which does not contain it", context,
                   shown_key(key), quote(shard.name));
      }
    }
    if (file.tensors.size() != shard.keys.size()) {
      for (const auto& [key, tensor] : file.tensors) {
        if (std::binary_search(shard.keys.begin(), shard.keys.end(), key)) continue;
        auto listed = weight_map->find(key);
        fail_input("{}: shard {} holds {}, which the weight_map {}", context,
                   quote(shard.name), shown_key(key),
                   listed == weight_map->end()
                       ? std::string("does not list")
                       : fmt::format("maps to {}",
                                     quote(listed->get_ref<const std::string&>())));
      }
    }
    out.merge(file.tensors);
  }
  return out;
}

}  // namespace ptepack::safetensors
