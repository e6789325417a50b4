// pack's packed-directory inputs, checked with verify's own directory checks.
#include <filesystem>

#include "artifact/input_rules.h"
#include "pack/pack_internal.h"
#include "verify/directory_check.h"

namespace ptepack::detail {

struct DirectoryInputs::Slot : StrictDirectoryCheck {
  using StrictDirectoryCheck::StrictDirectoryCheck;
};

DirectoryInputs::DirectoryInputs() = default;
DirectoryInputs::~DirectoryInputs() {
  if (background_.joinable()) background_.join();
}

void DirectoryInputs::reserve(size_t inputs, unsigned jobs) {
  slots_.resize(inputs);
  jobs_ = jobs;
}

Artifact DirectoryInputs::read(size_t slot, const InputSpec& spec, ProgramForm form) {
  if (!has_checkable_manifest(spec.path)) {
    ReadOptions read;
    read.jobs = jobs_;
    return load_artifact(spec.path, spec.data, true, form, read);
  }
  auto s = std::make_unique<Slot>(spec.path, jobs_);
  refuse_data(spec.path.string(), spec.data);
  Artifact artifact;
  artifact.name = spec.path.string();
  s->check.read_into(artifact, form, true);
  slots_.at(slot) = std::move(s);
  return artifact;
}

uint64_t DirectoryInputs::hash_total() const {
  uint64_t total = 0;
  for (const auto& s : slots_) {
    if (s) total += s->check.hash_total();
  }
  return total;
}

void DirectoryInputs::check_bytes(Progress* progress) {
  for (const auto& s : slots_) {
    if (!s) continue;
    s->check.bytes(progress);  // strict: raises the first problem
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
