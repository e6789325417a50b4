// The stored (uncompressed) ZIP layer of .ptn packages: hostile-input reader, pure
// deterministic layout planner and header writers, and CRC-32. See docs/format-zip.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ptepack/io/input_file.h"

namespace ptepack::zip {

// One stored member as the archive describes it (both headers agree on all of it).
struct Member {
  std::string name;
  uint64_t local_header_offset = 0;
  uint64_t data_offset = 0;  // absolute file offset of the stored bytes
  uint64_t size = 0;         // stored == uncompressed size
  uint32_t crc32 = 0;        // from the central directory
};

// Parses the end record (ZIP64 end record + locator when present), the central
// directory and every local header of a stored ZIP. Rejects (ErrorCode::invalid_input,
// message "<file>: ..." naming member/offset): no end record, multi-disk archives,
// compressed or encrypted members, data descriptors that disagree, sizes/offsets
// outside the file (checked arithmetic), central vs local header name/size mismatch,
// duplicate member names, overlapping member data, names with '..', absolute paths
// or backslashes, more than 65535 members or a central directory larger than
// Limits::max_header_bytes. Members are returned in central-directory order.
std::vector<Member> read_directory(const InputFile& file);

// Streams the member's bytes (in bounded chunks using `buffer`, sized to 1 MiB when
// empty) and compares their CRC-32 with member.crc32.
bool crc_matches(const InputFile& file, const Member& member, std::vector<uint8_t>& buffer);

// Where one entry goes in an archive being written.
struct EntryPlan {
  std::string name;
  uint64_t size = 0;
  uint64_t header_offset = 0;  // local header position
  uint64_t data_offset = 0;    // multiple of the alignment
  bool zip64 = false;          // sizes or header offset need ZIP64 fields
};

// The whole layout of an archive being written: entries, then the central directory.
struct ArchivePlan {
  std::vector<EntryPlan> entries;
  uint64_t directory_offset = 0;  // central directory start
  uint64_t end_offset = 0;        // == file size
};

// Pure layout: entries in the given order, each local header placed right after
// the previous entry's data, its extra field padded so the data starts at a multiple
// of `alignment` (power of two, 4..32768). ZIP64 extra fields/end records exactly when
// needed (any size or offset >= 0xFFFFFFFF, or >= 65535 entries). Names must be unique
// and pass the reader's name rules. A caller error (bad alignment or name, overflow)
// throws ErrorCode::internal.
ArchivePlan plan_archive(const std::vector<std::pair<std::string, uint64_t>>& entries,
                         uint64_t alignment = 64);

// The bytes from entry.header_offset to entry.data_offset (local header + padding extra).
std::string local_header(const EntryPlan& entry, uint32_t crc32);

// The bytes from plan.directory_offset to plan.end_offset: central directory,
// ZIP64 end record + locator when needed, end-of-central-directory record.
// `crcs` holds one CRC-32 per plan entry, in the same order.
std::string central_directory(const ArchivePlan& plan, const std::vector<uint32_t>& crcs);

// CRC-32 (zlib's crc32 / crc32_combine: fast, and combinable for parallel chunks).
// Start with crc = 0. crc32_combine(crc(A), crc(B), len(B)) == crc(A followed by B).
uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> bytes);
uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);

}  // namespace ptepack::zip
