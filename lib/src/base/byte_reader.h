// Bounds-checked little-endian cursor over bytes from an untrusted file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ptepack {

// Every read checks bounds; a short read throws invalid_input naming the
// context (file and member) and the offset.
class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> bytes, std::string context, uint64_t base_offset = 0)
      : bytes_(bytes), context_(std::move(context)), base_(base_offset) {}

  [[nodiscard]] uint64_t position() const noexcept { return pos_; }
  [[nodiscard]] uint64_t size() const noexcept { return bytes_.size(); }
  [[nodiscard]] uint64_t remaining() const noexcept { return bytes_.size() - pos_; }

  void seek(uint64_t position, std::string_view what);
  void skip(uint64_t count, std::string_view what);
  uint8_t u8(std::string_view what);
  uint16_t u16(std::string_view what);
  uint32_t u32(std::string_view what);
  uint64_t u64(std::string_view what);
  std::span<const uint8_t> bytes(uint64_t count, std::string_view what);
  std::string_view string(uint64_t count, std::string_view what);

 private:
  void need(uint64_t count, std::string_view what) const;

  std::span<const uint8_t> bytes_;
  std::string context_;
  uint64_t base_;
  uint64_t pos_ = 0;
};

// Little-endian stores into a byte buffer (writers build headers with these).
void put_u16(std::string& out, uint16_t value);
void put_u32(std::string& out, uint32_t value);
void put_u64(std::string& out, uint64_t value);
uint32_t load_u32(const uint8_t* p);
uint64_t load_u64(const uint8_t* p);

}  // namespace ptepack
