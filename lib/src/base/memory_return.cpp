// The host's memory-return hooks.
#include "ptepack/base/memory_return.h"

namespace ptepack {
namespace {

MemoryReturnHooks installed;

}  // namespace

void set_memory_return_hooks(MemoryReturnHooks hooks) { installed = hooks; }

PromptMemoryReturn::PromptMemoryReturn() {
  if (installed.begin != nullptr) installed.begin();
}

PromptMemoryReturn::~PromptMemoryReturn() {
  if (installed.end != nullptr) installed.end();
}

}  // namespace ptepack
