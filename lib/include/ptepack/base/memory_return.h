// Where the library frees far more memory than it takes, it can ask the host's
// allocator to hand freed pages back to the system at once.
#pragma once

namespace ptepack {

// An allocator such as mimalloc keeps freed pages for a while to reuse them.
// While pack frees its merged program and writes the encoded one into fresh
// pages, that keeps both resident. A host that links such an allocator installs
// these calls (the CLI does, for mimalloc); without them nothing changes.
struct MemoryReturnHooks {
  void (*begin)() = nullptr;  // from now on, return freed pages promptly
  void (*end)() = nullptr;    // back to the allocator's usual policy
};

// Installs the hooks; call once, before any pack runs.
void set_memory_return_hooks(MemoryReturnHooks hooks);

// Calls begin() when made and end() when gone; scopes opened inside others
// (or beside them, on other threads) call nothing until the last one closes.
class PromptMemoryReturn {
 public:
  PromptMemoryReturn();
  ~PromptMemoryReturn();
  PromptMemoryReturn(const PromptMemoryReturn&) = delete;
  PromptMemoryReturn& operator=(const PromptMemoryReturn&) = delete;
};

}  // namespace ptepack
