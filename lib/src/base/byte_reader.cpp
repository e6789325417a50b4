// Bounds-checked little-endian reads.
#include "base/byte_reader.h"

#include "ptepack/base/error.h"

namespace ptepack {

void ByteReader::need(uint64_t count, std::string_view what) const {
  if (count > remaining()) {
    fail_input("{}: truncated at offset {} reading {} ({} bytes needed, {} left)", context_,
               base_ + pos_, what, count, remaining());
  }
}

void ByteReader::seek(uint64_t position, std::string_view what) {
  if (position > bytes_.size()) {
    fail_input("{}: {} offset {} is past the end ({} bytes)", context_, what, base_ + position,
               base_ + bytes_.size());
  }
  pos_ = position;
}

void ByteReader::skip(uint64_t count, std::string_view what) {
  need(count, what);
  pos_ += count;
}

uint8_t ByteReader::u8(std::string_view what) {
  need(1, what);
  return bytes_[pos_++];
}

uint16_t ByteReader::u16(std::string_view what) {
  need(2, what);
  auto v = static_cast<uint16_t>(bytes_[pos_] | (bytes_[pos_ + 1] << 8));
  pos_ += 2;
  return v;
}

uint32_t ByteReader::u32(std::string_view what) {
  need(4, what);
  uint32_t v = load_u32(bytes_.data() + pos_);
  pos_ += 4;
  return v;
}

uint64_t ByteReader::u64(std::string_view what) {
  need(8, what);
  uint64_t v = load_u64(bytes_.data() + pos_);
  pos_ += 8;
  return v;
}

std::span<const uint8_t> ByteReader::bytes(uint64_t count, std::string_view what) {
  need(count, what);
  auto out = bytes_.subspan(pos_, count);
  pos_ += count;
  return out;
}

std::string_view ByteReader::string(uint64_t count, std::string_view what) {
  auto span = bytes(count, what);
  return {reinterpret_cast<const char*>(span.data()), span.size()};
}

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

uint64_t load_u64(const uint8_t* p) {
  return static_cast<uint64_t>(load_u32(p)) | (static_cast<uint64_t>(load_u32(p + 4)) << 32);
}

void put_u16(std::string& out, uint16_t value) {
  out += static_cast<char>(value & 0xff);
  out += static_cast<char>(value >> 8);
}

void put_u32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

void put_u64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

}  // namespace ptepack
