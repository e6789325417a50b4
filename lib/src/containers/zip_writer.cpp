// Stored ZIP with ZIP64: the deterministic layout planner and the header writers.
#include <algorithm>
#include <set>
#include <string_view>

#include "containers/zip_records.h"
#include "base/byte_reader.h"
#include "base/checked.h"
#include "ptepack/base/error.h"
#include "containers/zip.h"

namespace ptepack::zip {

using namespace detail;

namespace {

[[noreturn]] void plan_error(std::string_view what) {
  fail(ErrorCode::internal, "zip writer: {}", what);
}

uint64_t add_or_fail(uint64_t a, uint64_t b) {
  auto sum = checked_add(a, b);
  if (!sum) plan_error("archive size overflows 64 bits");
  return *sum;
}

// Bit 11 tells readers the name is UTF-8; ASCII names stay flag-free like most tools.
uint16_t name_flags(std::string_view name) {
  bool ascii = std::all_of(name.begin(), name.end(),
                           [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  return ascii ? 0 : kFlagUtf8;
}

bool size_is_wide(const EntryPlan& e) { return e.size >= kMax32; }
bool offset_is_wide(const EntryPlan& e) { return e.header_offset >= kMax32; }

// The central ZIP64 extra carries only the overflowing fields, in spec order.
uint64_t central_zip64_data_size(const EntryPlan& e) {
  return (size_is_wide(e) ? uint64_t{16} : 0) + (offset_is_wide(e) ? uint64_t{8} : 0);
}

uint64_t central_entry_size(const EntryPlan& e) {
  uint64_t data = central_zip64_data_size(e);
  return kCentralSize + e.name.size() + (data == 0 ? 0 : kExtraHeaderSize + data);
}

bool needs_zip64_end(uint64_t count, uint64_t directory_offset, uint64_t directory_size) {
  return count >= kMax16 || directory_offset >= kMax32 || directory_size >= kMax32;
}

uint32_t narrow32(uint64_t value) {
  return value >= kMax32 ? kMax32 : static_cast<uint32_t>(value);
}

}  // namespace

ArchivePlan plan_archive(const std::vector<std::pair<std::string, uint64_t>>& entries,
                         uint64_t alignment) {
  if (alignment < 4 || alignment > kMaxAlignment || (alignment & (alignment - 1)) != 0) {
    plan_error(
        fmt::format("alignment {} is not a power of two in [4, {}]", alignment, kMaxAlignment));
  }
  ArchivePlan plan;
  plan.entries.reserve(entries.size());
  std::set<std::string_view> seen;
  uint64_t position = 0;
  for (const auto& [name, size] : entries) {
    if (auto problem = name_problem(name); !problem.empty()) {
      plan_error(fmt::format("entry {}: {}", quote(name), problem));
    }
    if (name.size() > kMax16) {
      plan_error(fmt::format("entry name of {} bytes is longer than 65535", name.size()));
    }
    if (!seen.insert(name).second) plan_error(fmt::format("duplicate entry {}", quote(name)));
    EntryPlan e{name, size, position, 0, false};
    e.zip64 = size_is_wide(e) || offset_is_wide(e);
    // At least a bare 4-byte padding field, so every local header has the same shape.
    uint64_t header = kLocalSize + name.size() + (e.zip64 ? kLocalZip64ExtraSize : 0);
    auto data_offset = align_up(add_or_fail(position, header + kExtraHeaderSize), alignment);
    if (!data_offset) plan_error("archive size overflows 64 bits");
    e.data_offset = *data_offset;
    position = add_or_fail(e.data_offset, size);
    plan.entries.push_back(std::move(e));
  }
  plan.directory_offset = position;
  uint64_t directory_size = 0;
  for (const EntryPlan& e : plan.entries) {
    directory_size = add_or_fail(directory_size, central_entry_size(e));
  }
  uint64_t records = kEndSize;
  if (needs_zip64_end(plan.entries.size(), plan.directory_offset, directory_size)) {
    records += kEnd64Size + kLocator64Size;
  }
  plan.end_offset = add_or_fail(add_or_fail(position, directory_size), records);
  return plan;
}

std::string local_header(const EntryPlan& entry, uint32_t crc32) {
  uint64_t zip64_extra = entry.zip64 ? kLocalZip64ExtraSize : 0;
  uint64_t fixed = kLocalSize + entry.name.size() + zip64_extra;
  if (entry.zip64 != (size_is_wide(entry) || offset_is_wide(entry)) ||
      entry.data_offset < entry.header_offset ||
      entry.data_offset - entry.header_offset < fixed + kExtraHeaderSize ||
      entry.data_offset - entry.header_offset - kLocalSize - entry.name.size() > kMax16 ||
      entry.name.size() > kMax16) {
    plan_error(fmt::format("entry {} is not laid out by plan_archive", quote(entry.name)));
  }
  uint64_t padding = entry.data_offset - entry.header_offset - fixed;
  std::string out;
  out.reserve(static_cast<size_t>(fixed + padding));
  put_u32(out, kLocalSig);
  put_u16(out, entry.zip64 ? kNeedZip64 : kNeedStored);
  put_u16(out, name_flags(entry.name));
  put_u16(out, 0);  // method: stored
  put_u16(out, kDosTime);
  put_u16(out, kDosDate);
  put_u32(out, crc32);
  // With ZIP64 the local header always carries both sizes in the extra (spec 4.5.3).
  uint32_t size32 = entry.zip64 ? kMax32 : static_cast<uint32_t>(entry.size);
  put_u32(out, size32);  // compressed
  put_u32(out, size32);  // uncompressed
  put_u16(out, static_cast<uint16_t>(entry.name.size()));
  put_u16(out, static_cast<uint16_t>(zip64_extra + padding));
  out += entry.name;
  if (entry.zip64) {
    put_u16(out, kZip64ExtraId);
    put_u16(out, 16);
    put_u64(out, entry.size);  // uncompressed
    put_u64(out, entry.size);  // compressed
  }
  put_u16(out, kAlignExtraId);
  put_u16(out, static_cast<uint16_t>(padding - kExtraHeaderSize));
  out.append(static_cast<size_t>(padding - kExtraHeaderSize), '\0');
  return out;
}

std::string central_directory(const ArchivePlan& plan, const std::vector<uint32_t>& crcs) {
  if (crcs.size() != plan.entries.size()) {
    plan_error(fmt::format("{} CRCs for {} entries", crcs.size(), plan.entries.size()));
  }
  std::string out;
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const EntryPlan& e = plan.entries[i];
    uint64_t zip64_data = central_zip64_data_size(e);
    put_u32(out, kCentralSig);
    put_u16(out, kMadeBy);
    put_u16(out, e.zip64 ? kNeedZip64 : kNeedStored);
    put_u16(out, name_flags(e.name));
    put_u16(out, 0);  // method: stored
    put_u16(out, kDosTime);
    put_u16(out, kDosDate);
    put_u32(out, crcs[i]);
    put_u32(out, narrow32(e.size));  // compressed
    put_u32(out, narrow32(e.size));  // uncompressed
    put_u16(out, static_cast<uint16_t>(e.name.size()));
    put_u16(out, static_cast<uint16_t>(zip64_data == 0 ? 0 : kExtraHeaderSize + zip64_data));
    put_u16(out, 0);  // comment length
    put_u16(out, 0);  // disk number
    put_u16(out, 0);  // internal attributes
    put_u32(out, kRegularFile0644);
    put_u32(out, narrow32(e.header_offset));
    out += e.name;
    if (zip64_data != 0) {
      put_u16(out, kZip64ExtraId);
      put_u16(out, static_cast<uint16_t>(zip64_data));
      if (size_is_wide(e)) {
        put_u64(out, e.size);  // uncompressed
        put_u64(out, e.size);  // compressed
      }
      if (offset_is_wide(e)) put_u64(out, e.header_offset);
    }
  }
  uint64_t directory_size = out.size();
  uint64_t count = plan.entries.size();
  if (needs_zip64_end(count, plan.directory_offset, directory_size)) {
    uint64_t record_offset = add_or_fail(plan.directory_offset, directory_size);
    put_u32(out, kEnd64Sig);
    put_u64(out, kEnd64Size - 12);  // size of the rest of the record
    put_u16(out, kMadeBy);
    put_u16(out, kNeedZip64);
    put_u32(out, 0);  // this disk
    put_u32(out, 0);  // directory disk
    put_u64(out, count);
    put_u64(out, count);
    put_u64(out, directory_size);
    put_u64(out, plan.directory_offset);
    put_u32(out, kLocator64Sig);
    put_u32(out, 0);  // disk holding the ZIP64 end record
    put_u64(out, record_offset);
    put_u32(out, 1);  // total disks
  }
  // Only overflowing fields defer to the ZIP64 record, mirroring the central entries.
  auto count16 = static_cast<uint16_t>(std::min<uint64_t>(count, kMax16));
  put_u32(out, kEndSig);
  put_u16(out, 0);  // this disk
  put_u16(out, 0);  // directory disk
  put_u16(out, count16);
  put_u16(out, count16);
  put_u32(out, narrow32(directory_size));
  put_u32(out, narrow32(plan.directory_offset));
  put_u16(out, 0);  // comment length
  return out;
}

}  // namespace ptepack::zip
