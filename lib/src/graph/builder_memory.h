// Memory for large FlatBuffers builders: reserved, not copied, not zero-filled.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <cstddef>

namespace ptepack::detail {

// A builder for a buffer of about `expected_size` bytes. From 1 MiB up its
// memory comes straight from the kernel, with room for 1.5x that size: a
// builder writes from the end of its buffer down, so pages it has not reached
// are never made resident, and growing past the reservation remaps pages
// instead of copying the buffer into a new one (which briefly holds both).
// Smaller builders use the default heap allocator.
[[nodiscard]] flatbuffers::FlatBufferBuilder reserved_builder(size_t expected_size);

}  // namespace ptepack::detail
