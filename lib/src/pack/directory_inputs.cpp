// pack's packed-directory inputs, checked with verify's own directory checks.
#include <filesystem>

#include "pack/pack_internal.h"
#include "verify/directory_check.h"

namespace ptepack::detail {

struct DirectoryInputs::Slot {
  VerifyOptions options;
  VerifyReport report;
  std::unique_ptr<DirectoryCheck> check;
};

DirectoryInputs::DirectoryInputs() = default;
DirectoryInputs::~DirectoryInputs() {
  if (background_.joinable()) background_.join();
}

void DirectoryInputs::reserve(size_t inputs, unsigned jobs) {
  slots_.resize(inputs);
  jobs_ = jobs;
}

void DirectoryInputs::check_structure(size_t slot, const std::filesystem::path& path,
                                      bool default_data) {
  if (!has_checkable_manifest(path)) {
    // A program of a packed directory, loaded with the shards its manifest lists, is
    // checked against that record first; any other input's reader says what is wrong.
    if (default_data) (void)check_before_use(path, jobs_);
    return;
  }
  auto s = std::make_unique<Slot>();
  s->options.jobs = jobs_;
  s->options.tensors = true;  // pack takes each tensor's digest from the manifest
  s->check = std::make_unique<DirectoryCheck>(path, s->options, s->report);
  // Refused with the first problem verify would list (a structure problem comes first).
  s->check->structure();
  raise_first_problem(s->report);
  slots_.at(slot) = std::move(s);
}

uint64_t DirectoryInputs::hash_total() const {
  uint64_t total = 0;
  for (const auto& s : slots_) {
    if (s) total += s->check->hash_total();
  }
  return total;
}

void DirectoryInputs::check_bytes(Progress* progress) {
  for (const auto& s : slots_) {
    if (!s) continue;
    s->check->bytes(progress);
    raise_first_problem(s->report);
  }
}

void DirectoryInputs::start_bytes(Progress* progress) {
  bool any = false;
  for (const auto& s : slots_) any = any || s != nullptr;
  if (!any) return;
  background_ = std::thread([this, progress] {
    try {
      check_bytes(progress);
    } catch (...) {
      background_error_ = std::current_exception();
    }
  });
}

void DirectoryInputs::finish_bytes() {
  if (background_.joinable()) background_.join();
  if (background_error_) std::rethrow_exception(background_error_);
}

}  // namespace ptepack::detail
