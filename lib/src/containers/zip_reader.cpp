// Stored ZIP with ZIP64: the hostile-input directory reader and the CRC check of a member.
#include <algorithm>
#include <optional>
#include <set>
#include <string_view>

#include "containers/zip_records.h"
#include "base/byte_reader.h"
#include "base/checked.h"
#include "ptepack/base/error.h"
#include "containers/zip.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack::zip {
namespace {

using namespace detail;

// A reader over the data of the one ZIP64 extra field in an extra area (which starts at
// file offset `offset`), checking that the fields tile the area. Fewer than 4 trailing
// bytes are tolerated: older aligners padded with bare zeros.
std::optional<ByteReader> zip64_extra(std::span<const uint8_t> extra, const std::string& where,
                                      uint64_t offset) {
  ByteReader r(extra, where, offset);
  std::optional<ByteReader> found;
  while (r.remaining() >= kExtraHeaderSize) {
    uint64_t field_offset = offset + r.position();
    uint16_t id = r.u16("extra field id");
    uint16_t size = r.u16("extra field size");
    if (size > r.remaining()) {
      fail_input("{}: extra field 0x{:04x} at offset {} claims {} bytes but only {} remain", where,
                 id, field_offset, size, r.remaining());
    }
    auto data = r.bytes(size, "extra field");
    if (id == kZip64ExtraId) {
      if (found) fail_input("{}: second ZIP64 extra field at offset {}", where, field_offset);
      found.emplace(data, where, field_offset + kExtraHeaderSize);
    }
  }
  return found;
}

// A 32-bit field equal to 0xFFFFFFFF means "the next 8 bytes of the ZIP64 extra";
// without a ZIP64 extra the value is taken literally.
uint64_t widen(uint32_t value, std::optional<ByteReader>& zip64, std::string_view what) {
  if (value != kMax32 || !zip64) return value;
  return zip64->u64(what);
}

struct EndRecords {
  uint64_t member_count = 0;
  uint64_t directory_offset = 0;
  uint64_t directory_size = 0;
  uint64_t directory_end = 0;  // where the ZIP64 end record or the end record starts
};

void reject_multi_disk(const InputFile& file, uint64_t offset, uint64_t disk, uint64_t cd_disk,
                       uint64_t disk_entries, uint64_t total_entries) {
  if (disk == 0 && cd_disk == 0 && disk_entries == total_entries) return;
  fail_input(
      "{}: multi-disk archives are not supported (end record at offset {}: disk {}, directory "
      "disk {}, {} of {} entries on this disk)",
      file.name(), offset, disk, cd_disk, disk_entries, total_entries);
}

// Reads the ZIP64 end record named by the locator that sits just before the end record.
void read_zip64_end(const InputFile& file, uint64_t locator_offset, EndRecords& end) {
  const std::string& name = file.name();
  auto locator = file.read_range(locator_offset, kLocator64Size);
  ByteReader l(locator, name, locator_offset);
  l.skip(4, "ZIP64 locator signature");
  uint32_t record_disk = l.u32("ZIP64 locator disk");
  uint64_t record_offset = l.u64("ZIP64 end record offset");
  uint32_t disks = l.u32("ZIP64 locator disk count");
  if (record_disk != 0 || disks > 1) {
    fail_input(
        "{}: multi-disk archives are not supported (ZIP64 locator at offset {}: disk {} "
        "of {})",
        name, locator_offset, record_disk, disks);
  }
  if (!range_within(record_offset, kEnd64Size, locator_offset)) {
    fail_input(
        "{}: ZIP64 end record offset {} does not leave room for the record before the "
        "locator at offset {}",
        name, record_offset, locator_offset);
  }
  auto record = file.read_range(record_offset, kEnd64Size);
  ByteReader r(record, name, record_offset);
  uint32_t sig = r.u32("ZIP64 end record signature");
  if (sig != kEnd64Sig) {
    fail_input("{}: no ZIP64 end record at offset {} (found signature 0x{:08x})", name,
               record_offset, sig);
  }
  uint64_t record_size = r.u64("ZIP64 end record size");
  auto record_end = checked_add(record_offset, checked_add(record_size, 12).value_or(~0ULL));
  if (record_size < kEnd64Size - 12 || record_end != locator_offset) {
    fail_input(
        "{}: ZIP64 end record at offset {} has size {}, so it does not end at the "
        "locator (offset {})",
        name, record_offset, record_size, locator_offset);
  }
  r.skip(4, "ZIP64 end record versions");
  uint32_t disk = r.u32("ZIP64 end record disk");
  uint32_t cd_disk = r.u32("ZIP64 end record directory disk");
  uint64_t disk_entries = r.u64("ZIP64 end record entries on disk");
  uint64_t total = r.u64("ZIP64 end record entries");
  uint64_t size = r.u64("ZIP64 end record directory size");
  uint64_t offset = r.u64("ZIP64 end record directory offset");
  reject_multi_disk(file, record_offset, disk, cd_disk, disk_entries, total);
  // Readers that ignore ZIP64 use the 32-bit fields; they must not see another archive.
  if ((end.member_count != kMax16 && end.member_count != total) ||
      (end.directory_size != kMax32 && end.directory_size != size) ||
      (end.directory_offset != kMax32 && end.directory_offset != offset)) {
    fail_input(
        "{}: end record (entries {}, directory {} bytes at offset {}) disagrees with the "
        "ZIP64 end record (entries {}, directory {} bytes at offset {})",
        name, end.member_count, end.directory_size, end.directory_offset, total, size, offset);
  }
  end = {total, offset, size, record_offset};
}

EndRecords read_end_records(const InputFile& file) {
  const std::string& name = file.name();
  uint64_t file_size = file.size();
  if (file_size < kEndSize) {
    fail_input("{}: no end of central directory record (file is only {} bytes)", name, file_size);
  }
  uint64_t tail_size = std::min(file_size, kEndSize + kMaxComment);
  uint64_t tail_start = file_size - tail_size;
  auto tail = file.read_range(tail_start, tail_size);
  // The end record is the last signature whose comment reaches exactly to the end of the
  // file; trailing bytes after the comment are not accepted.
  std::optional<uint64_t> found;
  for (uint64_t i = tail_size - kEndSize + 1; i-- > 0;) {
    if (load_u32(&tail[i]) != kEndSig) continue;
    uint64_t comment =
        static_cast<uint64_t>(tail[i + 20]) | (static_cast<uint64_t>(tail[i + 21]) << 8);
    if (i + kEndSize + comment == tail_size) {
      found = i;
      break;
    }
  }
  if (!found) {
    fail_input("{}: no end of central directory record (not a ZIP file, or truncated)", name);
  }
  uint64_t end_offset = tail_start + *found;
  ByteReader r(std::span<const uint8_t>(tail).subspan(*found, kEndSize), name, end_offset);
  r.skip(4, "end record signature");
  uint16_t disk = r.u16("end record disk");
  uint16_t cd_disk = r.u16("end record directory disk");
  uint16_t disk_entries = r.u16("end record entries on disk");
  uint16_t total = r.u16("end record entries");
  uint32_t size = r.u32("end record directory size");
  uint32_t offset = r.u32("end record directory offset");
  reject_multi_disk(file, end_offset, disk, cd_disk, disk_entries, total);
  EndRecords end{total, offset, size, end_offset};
  if (end_offset >= kLocator64Size) {
    uint64_t locator_offset = end_offset - kLocator64Size;
    std::vector<uint8_t> sig(4);
    file.read_at(locator_offset, sig);
    if (load_u32(sig.data()) == kLocator64Sig) read_zip64_end(file, locator_offset, end);
  }
  return end;
}

struct CentralEntry {
  Member member;
  uint64_t entry_offset = 0;  // of the central directory entry, for messages
};

CentralEntry read_central_entry(const InputFile& file, ByteReader& r, uint64_t directory_offset) {
  CentralEntry entry;
  entry.entry_offset = directory_offset + r.position();
  uint32_t sig = r.u32("central directory entry signature");
  if (sig != kCentralSig) {
    fail_input("{}: no central directory entry at offset {} (found signature 0x{:08x})",
               file.name(), entry.entry_offset, sig);
  }
  r.skip(4, "central directory versions");
  uint16_t flags = r.u16("central directory flags");
  uint16_t method = r.u16("central directory method");
  r.skip(4, "central directory time and date");
  uint32_t crc = r.u32("central directory CRC-32");
  uint32_t compressed32 = r.u32("central directory compressed size");
  uint32_t size32 = r.u32("central directory size");
  uint16_t name_length = r.u16("central directory name length");
  uint16_t extra_length = r.u16("central directory extra length");
  uint16_t comment_length = r.u16("central directory comment length");
  uint16_t disk = r.u16("central directory disk");
  r.skip(6, "central directory attributes");
  uint32_t offset32 = r.u32("central directory local header offset");
  std::string name(r.string(name_length, "central directory name"));
  uint64_t extra_offset = directory_offset + r.position();
  auto extra = r.bytes(extra_length, "central directory extra field");
  r.skip(comment_length, "central directory comment");

  std::string where = fmt::format("{}: member {}", file.name(), quote(name));
  if (auto problem = name_problem(name); !problem.empty()) {
    fail_input("{} (central directory entry at offset {}): unsafe name: {}", where,
               entry.entry_offset, problem);
  }
  if (flags & kEncryptionFlags) fail_input("{}: encrypted (flags 0x{:04x})", where, flags);
  if (method != 0) {
    fail_input("{}: compressed (method {}); only stored members are supported", where, method);
  }
  std::optional<ByteReader> zip64 = zip64_extra(extra, where, extra_offset);
  uint64_t size = widen(size32, zip64, "ZIP64 uncompressed size");
  uint64_t compressed = widen(compressed32, zip64, "ZIP64 compressed size");
  uint64_t offset = widen(offset32, zip64, "ZIP64 local header offset");
  uint64_t wide_disk = (disk == kMax16 && zip64) ? zip64->u32("ZIP64 disk number") : disk;
  if (wide_disk != 0) {
    fail_input("{}: multi-disk archives are not supported (member on disk {})", where, wide_disk);
  }
  if (compressed != size) {
    fail_input("{}: stored member has compressed size {} but uncompressed size {}", where,
               compressed, size);
  }
  entry.member = Member{std::move(name), offset, 0, size, crc};
  return entry;
}

// Length of the data descriptor after the member's data that matches the central
// directory, trying the signed form first (a CRC may equal the signature).
uint64_t check_descriptor(const InputFile& file, const std::string& where, const Member& m,
                          bool wide, uint64_t directory_offset) {
  uint64_t data_end = m.data_offset + m.size;
  uint64_t width = wide ? 8 : 4;
  uint64_t room = directory_offset - data_end;
  auto bytes = file.read_range(data_end, std::min<uint64_t>(room, 4 + 4 + 2 * width));
  for (uint64_t sig_size : {uint64_t{4}, uint64_t{0}}) {
    uint64_t length = sig_size + 4 + 2 * width;
    if (length > bytes.size()) continue;
    ByteReader d(bytes, where, data_end);
    if (sig_size != 0 && d.u32("data descriptor signature") != kDescriptorSig) continue;
    uint32_t crc = d.u32("data descriptor CRC-32");
    uint64_t compressed = wide ? d.u64("data descriptor size") : d.u32("data descriptor size");
    uint64_t size = wide ? d.u64("data descriptor size") : d.u32("data descriptor size");
    if (crc == m.crc32 && compressed == m.size && size == m.size) return length;
  }
  fail_input(
      "{}: data descriptor at offset {} disagrees with the central directory (CRC-32 "
      "0x{:08x}, size {})",
      where, data_end, m.crc32, m.size);
}

// Checks the local header against the central entry, fills in data_offset, and
// returns the end of everything the member occupies (header, data, descriptor).
uint64_t check_local_header(const InputFile& file, Member& m, uint64_t directory_offset) {
  std::string where = fmt::format("{}: member {}", file.name(), quote(m.name));
  uint64_t at = m.local_header_offset;
  if (!range_within(at, kLocalSize, directory_offset)) {
    fail_input(
        "{}: local header offset {} is outside the member area (central directory "
        "starts at offset {})",
        where, at, directory_offset);
  }
  auto fixed = file.read_range(at, kLocalSize);
  ByteReader r(fixed, where, at);
  uint32_t sig = r.u32("local header signature");
  if (sig != kLocalSig) {
    fail_input("{}: no local header at offset {} (found signature 0x{:08x})", where, at, sig);
  }
  r.skip(2, "local header version");
  uint16_t flags = r.u16("local header flags");
  uint16_t method = r.u16("local header method");
  r.skip(4, "local header time and date");
  uint32_t crc = r.u32("local header CRC-32");
  uint32_t compressed32 = r.u32("local header compressed size");
  uint32_t size32 = r.u32("local header size");
  uint16_t name_length = r.u16("local header name length");
  uint16_t extra_length = r.u16("local header extra length");
  uint64_t variable = static_cast<uint64_t>(name_length) + extra_length;
  if (!range_within(at + kLocalSize, variable, directory_offset)) {
    fail_input("{}: local header at offset {} runs past the central directory (offset {})", where,
               at, directory_offset);
  }
  auto tail = file.read_range(at + kLocalSize, variable);
  std::string_view local_name(reinterpret_cast<const char*>(tail.data()), name_length);
  if (local_name != m.name) {
    fail_input("{}: local header at offset {} names {} instead", where, at, quote(local_name));
  }
  if (flags & kEncryptionFlags) fail_input("{}: encrypted (local flags 0x{:04x})", where, flags);
  if (method != 0) {
    fail_input("{}: compressed (local header method {}); only stored members are supported", where,
               method);
  }
  uint64_t extra_offset = at + kLocalSize + name_length;
  std::optional<ByteReader> zip64 =
      zip64_extra(std::span<const uint8_t>(tail).subspan(name_length), where, extra_offset);
  m.data_offset = extra_offset + extra_length;
  if (!range_within(m.data_offset, m.size, directory_offset)) {
    fail_input("{}: data at offset {} of {} bytes runs past the central directory (offset {})",
               where, m.data_offset, m.size, directory_offset);
  }
  if (flags & kFlagDescriptor) {
    // Streaming writers leave the local values zero and append a descriptor.
    auto agrees = [&](uint64_t local) { return local == 0 || local == kMax32 || local == m.size; };
    if ((crc != 0 && crc != m.crc32) || !agrees(size32) || !agrees(compressed32)) {
      fail_input(
          "{}: local header at offset {} (CRC-32 0x{:08x}, size {}) disagrees with the "
          "central directory (CRC-32 0x{:08x}, size {})",
          where, at, crc, size32, m.crc32, m.size);
    }
    return m.data_offset + m.size +
           check_descriptor(file, where, m, zip64.has_value(), directory_offset);
  }
  uint64_t size = widen(size32, zip64, "local ZIP64 uncompressed size");
  uint64_t compressed = widen(compressed32, zip64, "local ZIP64 compressed size");
  if (size != m.size || compressed != m.size || crc != m.crc32) {
    fail_input(
        "{}: local header at offset {} (size {}, compressed {}, CRC-32 0x{:08x}) "
        "disagrees with the central directory (size {}, CRC-32 0x{:08x})",
        where, at, size, compressed, crc, m.size, m.crc32);
  }
  return m.data_offset + m.size;
}

}  // namespace

std::vector<Member> read_directory(const InputFile& file) {
  const std::string& name = file.name();
  EndRecords end = read_end_records(file);
  if (end.member_count > kMaxMembers) {
    fail_input("{}: {} members, more than the limit of {}", name, end.member_count, kMaxMembers);
  }
  if (end.directory_size > Limits::max_header_bytes) {
    fail_input("{}: central directory of {} bytes exceeds the limit of {} bytes", name,
               end.directory_size, Limits::max_header_bytes);
  }
  if (checked_add(end.directory_offset, end.directory_size) != end.directory_end) {
    fail_input(
        "{}: central directory at offset {} of {} bytes does not end where the end "
        "records start (offset {})",
        name, end.directory_offset, end.directory_size, end.directory_end);
  }
  auto directory = file.read_range(end.directory_offset, end.directory_size);
  ByteReader r(directory, name, end.directory_offset);
  std::vector<Member> members;
  members.reserve(static_cast<size_t>(end.member_count));
  std::set<std::string, std::less<>> names;
  for (uint64_t i = 0; i < end.member_count; ++i) {
    CentralEntry entry = read_central_entry(file, r, end.directory_offset);
    if (!names.insert(entry.member.name).second) {
      fail_input("{}: duplicate member name {} (central directory entry at offset {})", name,
                 quote(entry.member.name), entry.entry_offset);
    }
    members.push_back(std::move(entry.member));
  }
  if (r.remaining() != 0) {
    fail_input("{}: {} unexpected bytes after the {} central directory entries (offset {})", name,
               r.remaining(), end.member_count, end.directory_offset + r.position());
  }
  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  spans.reserve(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    uint64_t span_end = check_local_header(file, members[i], end.directory_offset);
    spans.push_back({members[i].local_header_offset, span_end, i});
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i) {
    const Span& a = spans[i - 1];
    const Span& b = spans[i];
    if (b.begin < a.end) {
      fail_input("{}: members {} (offsets {}..{}) and {} (from offset {}) overlap", name,
                 quote(members[a.index].name), a.begin, a.end, quote(members[b.index].name),
                 b.begin);
    }
  }
  return members;
}

bool crc_matches(const InputFile& file, const Member& member, std::vector<uint8_t>& buffer) {
  if (!range_within(member.data_offset, member.size, file.size())) {
    fail_input("{}: member {} data at offset {} of {} bytes is outside the file ({} bytes)",
               file.name(), quote(member.name), member.data_offset, member.size, file.size());
  }
  if (buffer.empty()) buffer.resize(1 << 20);
  uint32_t crc = 0;
  for (uint64_t done = 0; done < member.size;) {
    uint64_t n = std::min<uint64_t>(buffer.size(), member.size - done);
    std::span<uint8_t> piece(buffer.data(), static_cast<size_t>(n));
    file.read_at(member.data_offset + done, piece);
    crc = crc32_update(crc, piece);
    done += n;
  }
  return crc == member.crc32;
}

}  // namespace ptepack::zip
