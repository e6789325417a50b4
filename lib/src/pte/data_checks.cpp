// A .pte program against its data files, as the runtime resolves them.
#include "pte/data_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>

#include "ptepack/base/error.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack {

void check_program_data(const pte::Program& program, const std::string& context,
                        const std::vector<DataFile>& files,
                        const std::vector<std::string>& named_keys, bool packed,
                        std::vector<std::string>& problems) {
  auto lookup = [&](const std::string& key, const std::string& what) -> const TensorData* {
    const TensorData* found = nullptr;
    std::vector<std::string> in;
    for (const auto& f : files) {
      if (auto it = f.tensors->find(key); it != f.tensors->end()) {
        found = &it->second;
        in.push_back(f.name);
      }
    }
    if (in.empty()) {
      problems.push_back(
          fmt::format("{}: {} {} is in none of its data files", context, what, quote(key)));
    } else if (in.size() > 1) {
      problems.push_back(fmt::format("{}: {} {} is in {} of its data files ({}): a load error",
                                     context, what, quote(key), in.size(), fmt::join(in, ", ")));
    }
    return found;
  };
  for (const auto& t : program.tensors) {
    const std::string at = fmt::format("method {} value {}", quote(program.plans[t.plan]), t.value);
    if (t.storage == pte::Storage::external) {
      const TensorData* d = lookup(t.fqn, at + ": EXTERNAL tensor");
      const auto order = normalized_dim_order(t.dim_order);
      if (d != nullptr &&
          (d->opaque || d->dtype != t.dtype || d->shape != t.shape || d->dim_order != order)) {
        problems.push_back(
            fmt::format("{}: {}: EXTERNAL tensor {}: data file layout {} [{}] differs from the "
                        "tensor's {} [{}]",
                        context, at, quote(t.fqn), d->opaque ? "none" : dtype_name(d->dtype),
                        fmt::join(d->shape, ", "), dtype_name(t.dtype), fmt::join(t.shape, ", ")));
      }
    } else if (packed && t.nbytes > 0 &&
               (t.storage == pte::Storage::constant_segment ||
                t.storage == pte::Storage::constant_buffer)) {
      problems.push_back(fmt::format("{}: {}: a {}-byte constant is still stored in the program",
                                     context, at, t.nbytes));
    }
  }
  for (const auto& key : named_keys) lookup(key, "named data");
  if (packed && !program.named_data.empty()) {
    problems.push_back(fmt::format("{}: {} named-data entries are still stored in the program",
                                   context, program.named_data.size()));
  }
}

void check_shared_state(const pte::Program& program, const std::string& context,
                        std::vector<std::string>& problems) {
  struct Range {
    uint64_t offset = 0;
    uint64_t size = 0;
    std::string method;
  };
  std::map<std::string, Range> named;
  uint64_t end = 0;
  for (const auto& t : program.tensors) {
    const auto* a = t.planned ? t.table->allocation_info() : nullptr;
    if (a == nullptr || a->memory_id() != 2) continue;
    const uint64_t offset = (uint64_t{a->memory_offset_high()} << 32) | a->memory_offset_low();
    const uint64_t size = t.known_type ? byte_size(t.dtype, t.shape).value_or(0) : 0;
    end = std::max(end, offset + size);
    if (t.fqn.empty() || t.storage == pte::Storage::external) continue;
    const std::string& method = program.plans[t.plan];
    auto [it, fresh] = named.emplace(t.fqn, Range{offset, size, method});
    if (!fresh && (it->second.offset != offset || it->second.size != size)) {
      problems.push_back(fmt::format(
          "{}: method {} value {}: shared buffer {} is at offset {} ({} bytes) of memory id 2, "
          "but at offset {} ({} bytes) in method {}",
          context, quote(method), t.value, quote(t.fqn), offset, size, it->second.offset,
          it->second.size, quote(it->second.method)));
    }
  }
  if (end == 0 && named.empty()) return;
  std::vector<std::pair<const std::string*, const Range*>> ranges;
  for (const auto& [name, range] : named) ranges.emplace_back(&name, &range);
  std::sort(ranges.begin(), ranges.end(),
            [](const auto& x, const auto& y) { return x.second->offset < y.second->offset; });
  for (size_t k = 1; k < ranges.size(); ++k) {
    const auto& [name, range] = ranges[k];
    const auto& [before, previous] = ranges[k - 1];
    if (range->size > 0 && range->offset < previous->offset + previous->size) {
      problems.push_back(fmt::format("{}: shared buffers {} and {} overlap in memory id 2",
                                     context, quote(*before), quote(*name)));
    }
  }
  std::optional<std::pair<int64_t, std::string>> arena;
  const auto* plans = program.root()->execution_plan();
  for (uint32_t p = 0; p < plans->size(); ++p) {
    const auto* sizes = plans->Get(p)->non_const_buffer_sizes();
    const std::string& method = program.plans[p];
    if (sizes == nullptr || sizes->size() < 3) {
      const bool uses = std::any_of(program.tensors.begin(), program.tensors.end(), [&](auto& t) {
        return t.plan == p && t.planned && t.table->allocation_info()->memory_id() == 2;
      });
      if (uses) {
        problems.push_back(fmt::format("{}: method {} plans memory id 2 but sizes no id 2",
                                       context, quote(method)));
      }
      continue;
    }
    const int64_t size = sizes->Get(2);
    if (size < 0 || static_cast<uint64_t>(size) < end) {
      problems.push_back(fmt::format("{}: method {}: memory id 2 is {} bytes, but its shared "
                                     "buffers end at {}",
                                     context, quote(method), size, end));
    }
    if (!arena) {
      arena.emplace(size, method);
    } else if (arena->first != size) {
      problems.push_back(fmt::format("{}: method {} sizes memory id 2 at {} bytes, method {} at "
                                     "{}: every method shares one arena",
                                     context, quote(method), size, quote(arena->second),
                                     arena->first));
    }
  }
}

}  // namespace ptepack
