// Merging .pte programs: which methods each input gives, under which names.
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>

#include "pte/merge_internal.h"
#include "ptepack/base/error.h"
#include "pte/merge.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::pte {
namespace {

namespace et = executorch_flatbuffer;

constexpr std::string_view kTrainingPrefixes[] = {
    "__et_training_gradients_index_", "__et_training_parameters_index_", "__et_training_fqn_"};

// The method a training companion belongs to, or nullopt for any other name.
std::optional<std::string> companion_of(const std::string& name) {
  for (auto prefix : kTrainingPrefixes) {
    if (name.size() > prefix.size() && name.starts_with(prefix))
      return name.substr(prefix.size());
  }
  return std::nullopt;
}

std::string companion_renamed(const std::string& name, const std::string& method) {
  for (auto prefix : kTrainingPrefixes) {
    if (name.starts_with(prefix)) return std::string(prefix) + method;
  }
  return name;
}

}  // namespace

namespace detail {

bool has_instructions(const Program& p, uint32_t plan) {
  const auto* chains = p.root()->execution_plan()->Get(plan)->chains();
  for (uint32_t c = 0; chains != nullptr && c < chains->size(); ++c) {
    const auto* instructions = chains->Get(c)->instructions();
    if (instructions != nullptr && instructions->size() > 0) return true;
  }
  return false;
}

}  // namespace detail

namespace {

using detail::has_instructions;

// Backends that find their data by the ExecuTorch method name.
constexpr std::string_view kNameBoundBackends[] = {"QnnBackend", "CoreMLBackend"};

void check_renamable(const MergeInput& in, uint32_t plan, const std::string& to) {
  const Program& p = *in.program;
  const std::string& from = p.plans[plan];
  for (const Delegate& d : p.delegates) {
    if (d.plan != plan) continue;
    for (auto backend : kNameBoundBackends) {
      if (d.id == backend) {
        fail(ErrorCode::usage,
             "{}: method {} cannot be renamed to {}: its {} delegate finds its data by the "
             "method name",
             in.name, quote(from), quote(to), d.id);
      }
    }
  }
  const std::string blob = from + "_so_blob";
  bool named = std::any_of(p.named_data.begin(), p.named_data.end(),
                           [&](const NamedEntry& e) { return e.key == blob; });
  if (named || (in.data != nullptr && in.data->count(blob) != 0)) {
    fail(ErrorCode::usage,
         "{}: method {} cannot be renamed to {}: its AOTI delegate finds named data {} by the "
         "method name",
         in.name, quote(from), quote(to), quote(blob));
  }
}

// Output names of one input's plans after its METHOD= rename.
std::vector<std::string> output_names(const MergeInput& in,
                                      const std::optional<std::string>& rename) {
  const Program& p = *in.program;
  std::vector<std::string> names = p.plans;
  if (!rename) return names;
  std::vector<uint32_t> main;
  for (uint32_t k = 0; k < p.plans.size(); ++k) {
    if (has_instructions(p, k) && !companion_of(p.plans[k])) main.push_back(k);
  }
  if (main.size() != 1) {
    std::vector<std::string> listed;
    for (uint32_t k : main) listed.push_back(p.plans[k]);
    fail(ErrorCode::usage,
         "{}: METHOD= renames the one method of a single-method program; this one has {} "
         "methods with instructions ({}): keep one first (pack {} --method M -o ONE.pte)",
         in.name, main.size(), fmt::join(listed, ", "), in.name);
  }
  const std::string& from = p.plans[main.front()];
  const std::string& to = *rename;
  if (to != from) check_renamable(in, main.front(), to);
  names[main.front()] = to;
  for (uint32_t k = 0; k < p.plans.size(); ++k) {
    if (companion_of(p.plans[k]) == from) names[k] = companion_renamed(p.plans[k], to);
  }
  return names;
}

}  // namespace

void choose_methods(std::vector<MergeInput>& inputs,
                    const std::vector<std::optional<std::string>>& renames,
                    const std::vector<std::string>& keep) {
  std::set<std::string> wanted(keep.begin(), keep.end());
  std::set<std::string> found;
  std::vector<std::string> all;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto& in = inputs[i];
    const Program& p = *in.program;
    auto names = output_names(in, renames.at(i));
    in.plans.clear();
    in.names.clear();
    for (uint32_t k = 0; k < p.plans.size(); ++k) {
      all.push_back(names[k]);
      const auto owner = companion_of(names[k]);
      const bool constant_only = !has_instructions(p, k);
      bool kept = wanted.empty() || wanted.count(names[k]) != 0 ||
                  (owner ? wanted.count(*owner) != 0 && constant_only : constant_only);
      if (wanted.count(names[k]) != 0) found.insert(names[k]);
      if (!kept) continue;
      in.plans.push_back(k);
      in.names.push_back(names[k]);
    }
  }
  for (const auto& name : keep) {
    if (found.count(name) == 0) {
      std::sort(all.begin(), all.end());
      all.erase(std::unique(all.begin(), all.end()), all.end());
      fail(ErrorCode::usage, "--method {} names no method of the input{}; there are: {}",
           quote(name), inputs.size() == 1 ? "" : "s", fmt::join(all, ", "));
    }
  }
}

namespace detail {

// What a constant-only method returns, for "the same values in every input";
// nullopt when it returns something not compared here (lists).
std::optional<std::vector<std::string>> returned_values(const Program& p, uint32_t plan,
                                                        const RangeDigests& digests) {
  std::vector<std::string> out;
  const auto* ep = p.root()->execution_plan()->Get(plan);
  const auto* values = ep->values();
  std::map<uint32_t, const TensorInfo*> tensors;
  for (const auto& t : p.tensors) {
    if (t.plan == plan) tensors.emplace(t.value, &t);
  }
  for (uint32_t k = 0; ep->outputs() != nullptr && k < ep->outputs()->size(); ++k) {
    const auto index = static_cast<uint32_t>(ep->outputs()->Get(k));
    const auto* v = values->Get(index);
    std::string text = std::string(et::EnumNameKernelTypes(v->val_type())) + ":";
    switch (v->val_type()) {
      case et::KernelTypes::Int:
        text += std::to_string(v->val_as_Int()->int_val());
        break;
      case et::KernelTypes::Bool:
        text += v->val_as_Bool()->bool_val() ? "true" : "false";
        break;
      case et::KernelTypes::Double:
        text += std::to_string(std::bit_cast<uint64_t>(v->val_as_Double()->double_val()));
        break;
      case et::KernelTypes::String:
        text += v->val_as_String()->string_val() ? v->val_as_String()->string_val()->str() : "";
        break;
      case et::KernelTypes::Tensor: {
        const TensorInfo* t = tensors.at(index);
        text += fmt::format("{} [{}] {}", t->scalar_type, fmt::join(t->shape, ","),
                            storage_name(t->storage));
        if (t->storage != Storage::none && t->storage != Storage::external)
          text += " " + to_hex(digests.of(t->bytes));
        else if (t->storage == Storage::external)
          text += " " + t->fqn;
        break;
      }
      case et::KernelTypes::Null:
        break;
      default:
        return std::nullopt;
    }
    out.push_back(std::move(text));
  }
  return out;
}

// Which of `keys` occur in the bytes of `ranges`: one rolling hash per key
// length over the streamed bytes, each hit confirmed byte for byte.
std::set<std::string> keys_found(const std::vector<ByteRange>& ranges,
                                 const std::set<std::string>& keys) {
  constexpr uint64_t kBase = 1099511628211ULL;
  std::map<size_t, std::map<uint64_t, std::vector<const std::string*>>> by_length;
  size_t longest = 0;
  for (const auto& key : keys) {
    if (key.empty()) continue;
    uint64_t h = 0;
    for (char c : key) h = h * kBase + static_cast<unsigned char>(c);
    by_length[key.size()][h].push_back(&key);
    longest = std::max(longest, key.size());
  }
  std::set<std::string> found;
  std::vector<uint8_t> buffer(kChunkBytes);
  for (const ByteRange& range : ranges) {
    std::string window;  // the last longest-1 bytes, then the new chunk
    for_each_chunk(range, buffer, [&](std::span<const uint8_t> chunk) {
      window.append(reinterpret_cast<const char*>(chunk.data()), chunk.size());
      for (const auto& [length, hashes] : by_length) {
        if (window.size() < length) continue;
        uint64_t power = 1;
        for (size_t k = 1; k < length; ++k) power *= kBase;
        uint64_t h = 0;
        for (size_t k = 0; k < length; ++k) h = h * kBase + static_cast<unsigned char>(window[k]);
        for (size_t at = 0;; ++at) {
          if (auto it = hashes.find(h); it != hashes.end()) {
            for (const std::string* key : it->second) {
              if (window.compare(at, length, *key) == 0) found.insert(*key);
            }
          }
          if (at + length >= window.size()) break;
          h = (h - power * static_cast<unsigned char>(window[at])) * kBase +
              static_cast<unsigned char>(window[at + length]);
        }
      }
      if (window.size() > longest) window.erase(0, window.size() - (longest - 1));
    });
  }
  return found;
}

std::set<std::string> keys_named_by_plan(const Program& p, uint32_t plan,
                                         const std::set<std::string>& keys) {
  std::vector<ByteRange> blobs;
  for (const Delegate& d : p.delegates) {
    if (d.plan != plan) continue;
    ByteRange range{p.file, 0, d.size};
    if (d.inline_data) {
      const auto* data = p.root()->backend_delegate_data()->Get(d.index)->data();
      if (data == nullptr) continue;
      range.offset = static_cast<uint64_t>(data->Data() - p.flatbuffer.data());
    } else {
      range.offset = p.segments[d.index].offset;
    }
    blobs.push_back(range);
  }
  return keys_found(blobs, keys);
}

}  // namespace detail
}  // namespace ptepack::pte
