// A .pte program against its data files, as the runtime resolves them.
#include "pte/data_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ptepack/base/error.h"

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

}  // namespace ptepack
