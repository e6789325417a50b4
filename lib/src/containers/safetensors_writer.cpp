// safetensors: the writer's header text and layout, and the index text.
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "containers/safetensors_keys.h"
#include "json/json_writer.h"
#include "base/byte_reader.h"
#include "base/checked.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "containers/safetensors.h"

namespace ptepack::safetensors {

using json = nlohmann::json;
using detail::check_key;

namespace {

// `text` as a JSON string literal, escaped as nlohmann's serializer escapes it; ill-formed
// UTF-8 is refused (safetensors headers are UTF-8, and the reader would reject it anyway).
void append_json_text(std::string& out, std::string_view text, std::string_view what) {
  if (!is_utf8(text)) fail_input("{} {} is not valid UTF-8", what, shown_key(text));
  append_json_string(out, text);
}

void append_entry(std::string& out, std::string_view key, std::string_view code, const Shape& shape,
                  uint64_t begin, uint64_t end) {
  append_json_text(out, key, "tensor key");
  fmt::format_to(std::back_inserter(out),
                 ":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", code,
                 fmt::join(shape, ","), begin, end);
}

// `"__metadata__":{...}` without a trailing comma, or "" when there is no metadata.
std::string metadata_member(const std::map<std::string, std::string>& metadata) {
  if (metadata.empty()) return {};
  std::string out = "\"__metadata__\":{";
  for (const auto& [key, value] : metadata) {
    if (out.back() != '{') out += ',';
    append_json_text(out, key, "metadata key");
    out += ':';
    append_json_text(out, value, "metadata value");
  }
  out += '}';
  return out;
}

}  // namespace

Layout plan_file(const std::vector<Entry>& entries,
                 const std::map<std::string, std::string>& metadata) {
  std::vector<size_t> by_key(entries.size());
  for (size_t i = 0; i < by_key.size(); ++i) by_key[i] = i;
  auto key_less = [&](size_t a, size_t b) { return entries[a].key < entries[b].key; };
  if (!std::is_sorted(by_key.begin(), by_key.end(), key_less)) {  // pack's come sorted
    std::sort(by_key.begin(), by_key.end(), key_less);
  }

  Layout layout;
  std::vector<uint64_t> relative(entries.size());
  uint64_t total = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& entry = entries[i];
    check_key(entry.key, "safetensors writer");
    if (entry.key == "__metadata__") {
      fail_input("cannot store a tensor named '__metadata__' in safetensors: the name is reserved");
    }
    if (i > 0 && entries[by_key[i]].key == entries[by_key[i - 1]].key) {
      fail_input("safetensors writer: duplicate tensor key {}", shown_key(entries[by_key[i]].key));
    }
    if (entry.shape.size() > Limits::max_rank) {
      fail_input("safetensors writer: tensor {} has rank {}, above the limit of {}",
                 shown_key(entry.key), entry.shape.size(), Limits::max_rank);
    }
    if (safetensors_code(entry.dtype).empty()) {
      fail_input("safetensors writer: tensor {} has type {}, which safetensors cannot store",
                 shown_key(entry.key), dtype_name(entry.dtype));
    }
    auto expected = byte_size(entry.dtype, entry.shape);
    if (!expected || *expected != entry.nbytes) {
      fail_input("safetensors writer: tensor {} has {} bytes, which do not match {} [{}]",
                 shown_key(entry.key), entry.nbytes, safetensors_code(entry.dtype),
                 fmt::join(entry.shape, ", "));
    }
    relative[i] = total;
    auto next = checked_add(total, entry.nbytes);
    if (!next) fail_input("safetensors writer: total tensor size overflows 64 bits");
    total = *next;
  }

  std::string header = "{" + metadata_member(metadata);
  for (size_t i : by_key) {
    const Entry& entry = entries[i];
    if (header.size() > 1) header += ',';
    append_entry(header, entry.key, safetensors_code(entry.dtype), entry.shape, relative[i],
                 relative[i] + entry.nbytes);
  }
  header += '}';
  if (header.size() > Limits::max_header_bytes) {
    fail_input(
        "safetensors writer: a header of {} bytes for {} tensors would exceed the limit of {} "
        "bytes that readers accept",
        header.size(), entries.size(), Limits::max_header_bytes);
  }
  layout.header_size = 8 + header.size();
  // Padding to a multiple of 8 keeps the data section 8-byte aligned (as the reference writer).
  header.append((8 - header.size() % 8) % 8, ' ');

  put_u64(layout.head, header.size());
  layout.head += header;
  layout.data_offsets.reserve(entries.size());
  for (uint64_t offset : relative) layout.data_offsets.push_back(layout.head.size() + offset);
  auto file_size = checked_add(layout.head.size(), total);
  if (!file_size) fail_input("safetensors writer: file size overflows 64 bits");
  layout.file_size = *file_size;
  return layout;
}

uint64_t entry_json_size(std::string_view key, DType dtype, const Shape& shape, uint64_t begin,
                         uint64_t end) {
  std::string member;
  append_entry(member, key, safetensors_code(dtype), shape, begin, end);
  return member.size();
}

std::string index_json(
    uint64_t total_size,
    const std::vector<std::pair<std::string_view, std::string_view>>& weight_map) {
  // Written field by field (a DOM of a million keys would take hundreds of MB).
  JsonWriter w;
  w.begin_object();
  w.key("metadata");
  w.begin_object();
  w.field("total_size", total_size);
  w.end_object();
  w.key("weight_map");
  w.begin_object();
  for (const auto& [key, file] : weight_map) {
    if (!is_utf8(key) || !is_utf8(file))
      fail_input("safetensors index: a key or shard name is not valid UTF-8");
    w.key(key);
    w.value(file);
  }
  w.end_object();
  w.end_object();
  return std::move(w).finish();
}

}  // namespace ptepack::safetensors
