// Shared between the pack orchestration and the two output writers.
#pragma once

#include <string>
#include <vector>

#include "ptepack/io/output_file.h"
#include "ptepack/io/progress.h"
#include "ptepack/packing/pack.h"
#include "ptepack/packing/storage.h"

namespace ptepack::detail {

// Everything decided before the first byte is written.
struct PreparedPack {
  MergedProgram merged;
  std::vector<StoredTensor> tensors;  // sorted by key
  std::string program_bytes;          // the final .ptg
};

// Fill `summary` with the plan; when `output` is non-null, also write into its
// temporary path (the caller commits).
void write_package(const PreparedPack& prepared, const PackOptions& options, AtomicOutput* output,
                   Progress* progress, PackSummary& summary);
void write_directory(const PreparedPack& prepared, const PackOptions& options, AtomicOutput* output,
                     Progress* progress, PackSummary& summary);

// Summary fields shared by both writers: dedup, aliases and byte counts.
// Also tells `progress` how many bytes the writer will copy.
void summarize_groups(const std::vector<StoredTensor>& tensors,
                      const std::vector<StorageGroup>& groups, PackSummary& summary,
                      Progress* progress);

}  // namespace ptepack::detail
