// Stored ZIP with ZIP64: the record signatures, sizes and fixed header values the
// reader and the writer share, and the member-name rule both apply. Byte layout:
// docs/format-zip.md.
#pragma once

#include <cstdint>
#include <string_view>

namespace ptepack::zip::detail {

// Record signatures and fixed sizes (APPNOTE.TXT 4.3).
inline constexpr uint32_t kLocalSig = 0x04034b50;
inline constexpr uint32_t kCentralSig = 0x02014b50;
inline constexpr uint32_t kEndSig = 0x06054b50;
inline constexpr uint32_t kEnd64Sig = 0x06064b50;
inline constexpr uint32_t kLocator64Sig = 0x07064b50;
inline constexpr uint32_t kDescriptorSig = 0x08074b50;
inline constexpr uint64_t kLocalSize = 30;
inline constexpr uint64_t kCentralSize = 46;
inline constexpr uint64_t kEndSize = 22;
inline constexpr uint64_t kEnd64Size = 56;
inline constexpr uint64_t kLocator64Size = 20;
inline constexpr uint64_t kMaxComment = 0xFFFF;

inline constexpr uint16_t kZip64ExtraId = 0x0001;
inline constexpr uint16_t kAlignExtraId = 0xD935;  // Android zipalign's; readers skip unknown IDs
inline constexpr uint64_t kExtraHeaderSize = 4;
inline constexpr uint64_t kLocalZip64ExtraSize = 4 + 16;
inline constexpr uint32_t kMax32 = 0xFFFFFFFF;  // also the "value is in the ZIP64 extra" marker
inline constexpr uint16_t kMax16 = 0xFFFF;
inline constexpr uint64_t kMaxMembers = 65535;
inline constexpr uint64_t kMaxAlignment = 32768;  // padding extra must fit its 16-bit length

// Fixed header values that make the output reproducible (docs/format-zip.md).
inline constexpr uint16_t kMadeBy = (3 << 8) | 45;  // host 3 = Unix, spec version 4.5
inline constexpr uint16_t kNeedStored = 20;
inline constexpr uint16_t kNeedZip64 = 45;
inline constexpr uint16_t kDosTime = 0;
inline constexpr uint16_t kDosDate = 0x0021;  // 1980-01-01, the earliest DOS date
inline constexpr uint32_t kRegularFile0644 = 0100644u << 16;

inline constexpr uint16_t kFlagEncrypted = 0x0001;
inline constexpr uint16_t kFlagDescriptor = 0x0008;
inline constexpr uint16_t kFlagStrongEncryption = 0x0040;
inline constexpr uint16_t kFlagUtf8 = 0x0800;
inline constexpr uint16_t kFlagMaskedHeaders = 0x2000;
inline constexpr uint16_t kEncryptionFlags =
    kFlagEncrypted | kFlagStrongEncryption | kFlagMaskedHeaders;

// Why a member name is unsafe (could escape an extraction directory) or ambiguous;
// empty when it is fine. Shared by the reader and the planner, so everything
// ptepack writes it can read back.
inline std::string_view name_problem(std::string_view name) {
  if (name.empty()) return "empty name";
  if (name.find('\0') != std::string_view::npos) return "NUL byte in name";
  if (name.find('\\') != std::string_view::npos) return "backslash in name";
  if (name.front() == '/') return "absolute path";
  if (name.size() >= 2 && name[1] == ':') return "drive-letter path";
  size_t start = 0;
  while (true) {
    size_t slash = name.find('/', start);
    if (name.substr(start, slash - start) == "..") return "'..' path component";
    if (slash == std::string_view::npos) return {};
    start = slash + 1;
  }
}

}  // namespace ptepack::zip::detail
