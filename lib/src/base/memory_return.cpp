// The host's memory-return hooks.
#include "ptepack/base/memory_return.h"

#include <mutex>

namespace ptepack {
namespace {

MemoryReturnHooks installed;
// Scopes open now, in any thread: the hooks bracket the outermost only.
std::mutex scopes_mutex;
int open_scopes = 0;

}  // namespace

void set_memory_return_hooks(MemoryReturnHooks hooks) { installed = hooks; }

PromptMemoryReturn::PromptMemoryReturn() {
  std::lock_guard lock(scopes_mutex);
  if (open_scopes++ == 0 && installed.begin != nullptr) installed.begin();
}

PromptMemoryReturn::~PromptMemoryReturn() {
  std::lock_guard lock(scopes_mutex);
  if (--open_scopes == 0 && installed.end != nullptr) installed.end();
}

}  // namespace ptepack
