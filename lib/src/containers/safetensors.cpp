// safetensors: strict header parsing (SAX, no DOM), the sharded index reader, the writer's layout.
#include "ptepack/containers/safetensors.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "json/json_writer.h"
#include "ptepack/base/byte_reader.h"
#include "ptepack/base/checked.h"
#include "ptepack/base/error.h"
#include "ptepack/base/format_util.h"
#include "ptepack/json/json_util.h"

namespace ptepack::safetensors {

using json = nlohmann::json;

namespace {

void check_key(std::string_view key, const std::string& context) {
  if (key.empty()) fail_input("{}: empty tensor key", context);
  check_name(key, "tensor key", context);
  if (key.size() > Limits::max_key_length) {
    fail_input("{}: tensor key {} is longer than the limit of {} bytes", context, shown_key(key),
               Limits::max_key_length);
  }
}

// Streams the header straight into a File, with no DOM in between, so a header of millions of
// entries costs about what the TensorTable costs. Only the safetensors shape is accepted (object,
// entry objects, shape and offset arrays), so nesting never exceeds three levels: anything deeper
// is rejected at its first bracket, well below Limits::max_json_depth.
class HeaderParser {
 public:
  HeaderParser(InputFilePtr file, const std::string& context, File& out, uint64_t data_size,
               uint64_t header_offset)
      : file_(std::move(file)),
        context_(context),
        out_(out),
        data_size_(data_size),
        header_offset_(header_offset) {}

  bool null() { return mismatch("null"); }
  bool boolean(bool) { return mismatch("a boolean"); }
  bool binary(json::binary_t&) { return mismatch("binary data"); }
  bool number_integer(json::number_integer_t value) {
    if (value >= 0) return number_unsigned(static_cast<uint64_t>(value));  // "-0"
    if (state_ == State::shape) fail_entry("has negative dim {} in its shape", value);
    if (state_ == State::offsets) fail_entry("has negative data offset {}", value);
    return mismatch("a number");
  }
  bool number_unsigned(json::number_unsigned_t value) {
    if (state_ == State::shape) return add_dim(value);
    if (state_ == State::offsets) return add_offset(value);
    return mismatch("a number");
  }
  bool number_float(json::number_float_t, const json::string_t& text) {
    // nlohmann reports integers beyond 64 bits as floats too.
    if (state_ == State::shape) fail_entry("has dim {} in its shape, not an int64", text);
    if (state_ == State::offsets) fail_entry("has data offset {}, not a uint64", text);
    return mismatch("a number");
  }
  bool string(json::string_t& value) {
    if (state_ == State::metadata) {
      out_.metadata.emplace(std::move(metadata_key_), std::move(value));
      return true;
    }
    if (state_ == State::entry && field_ == Field::dtype) return set_dtype(value);
    return mismatch("a string");
  }
  bool start_object(std::size_t) {
    if (state_ == State::start) {
      state_ = State::top;
    } else if (state_ == State::top && in_metadata_) {
      state_ = State::metadata;
    } else if (state_ == State::top) {
      state_ = State::entry;
    } else {
      return mismatch("an object");
    }
    return true;
  }
  bool end_object() {
    if (state_ == State::entry) finish_entry();
    state_ = state_ == State::top ? State::done : State::top;
    return true;
  }
  bool start_array(std::size_t) {
    if (state_ == State::entry && field_ == Field::shape) {
      state_ = State::shape;
    } else if (state_ == State::entry && field_ == Field::offsets) {
      state_ = State::offsets;
    } else {
      return mismatch("an array");
    }
    return true;
  }
  bool end_array() {
    state_ = State::entry;
    return true;
  }
  bool key(json::string_t& key) {
    if (state_ == State::top) return top_key(key);
    if (state_ == State::metadata) {
      if (out_.metadata.contains(key)) {
        fail_input("{}: duplicate __metadata__ key {}", context_, shown_key(key));
      }
      metadata_key_ = std::move(key);
      return true;
    }
    return field_key(key);
  }
  bool parse_error(std::size_t position, const std::string&, const json::exception& ex) {
    fail_json_syntax(context_, header_offset_, position, ex.what());
  }

  // Called after the whole header parsed: the tensors must cover the data section exactly once.
  void check_tiling() {
    std::sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) {
      return std::tie(a.begin, a.end, *a.key) < std::tie(b.begin, b.end, *b.key);
    });
    uint64_t cursor = 0;
    const std::string* previous = nullptr;
    for (const Span& span : spans_) {
      if (span.begin > cursor) {
        fail_input(
            "{}: gap of {} bytes in the data section at offset {}, before tensor {} [{}, {}]",
            context_, span.begin - cursor, cursor, shown_key(*span.key), span.begin, span.end);
      }
      if (span.begin < cursor) {
        fail_input("{}: tensor {} data_offsets [{}, {}] overlap tensor {}, which ends at {}",
                   context_, shown_key(*span.key), span.begin, span.end, shown_key(*previous),
                   cursor);
      }
      cursor = span.end;
      previous = span.key;
    }
    if (cursor != data_size_) {
      fail_input("{}: the last {} bytes of the data section (from offset {}) belong to no tensor",
                 context_, data_size_ - cursor, cursor);
    }
  }

 private:
  enum class State { start, top, metadata, entry, shape, offsets, done };
  enum class Field { none, dtype, shape, offsets };
  struct Span {
    uint64_t begin;
    uint64_t end;
    const std::string* key;  // a TensorTable key: map nodes do not move
  };

  template <typename... Args>
  [[noreturn]] void fail_entry(fmt::format_string<Args...> what, Args&&... args) const {
    fail_input("{}: tensor {} {}", context_, shown_key(key_),
               fmt::format(what, std::forward<Args>(args)...));
  }

  // A value of the wrong JSON type where it appears.
  [[noreturn]] bool mismatch(std::string_view found) const {
    switch (state_) {
      case State::start:
        fail_input("{}: header is {}, not a JSON object", context_, found);
      case State::top:
        if (in_metadata_) fail_input("{}: __metadata__ is {}, not an object", context_, found);
        fail_entry("is {}, not an object", found);
      case State::metadata:
        fail_input("{}: __metadata__ value of {} is {}, not a string", context_,
                   shown_key(metadata_key_), found);
      case State::shape:
        fail_entry("has {} in its shape, not a dim", found);
      case State::offsets:
        fail_entry("has {} in its data_offsets, not an offset", found);
      case State::entry:
      case State::done:
        break;
    }
    if (field_ == Field::dtype) fail_entry("has a dtype that is {}, not a string", found);
    if (field_ == Field::shape) fail_entry("has a shape that is {}, not an array", found);
    fail_entry("has data_offsets that are {}, not an array", found);
  }

  bool top_key(json::string_t& key) {
    in_metadata_ = key == "__metadata__";
    if (in_metadata_) {
      if (seen_metadata_) fail_input("{}: duplicate key '__metadata__'", context_);
      seen_metadata_ = true;
      return true;
    }
    check_key(key, context_);
    if (out_.tensors.contains(key))
      fail_input("{}: duplicate tensor key {}", context_, shown_key(key));
    if (out_.tensors.size() >= Limits::max_keys) {
      fail_input("{}: more than {} tensors", context_, Limits::max_keys);
    }
    key_ = std::move(key);
    field_ = Field::none;
    seen_ = 0;
    shape_.clear();
    offset_count_ = 0;
    return true;
  }

  bool field_key(const json::string_t& key) {
    if (key == "dtype") {
      field_ = Field::dtype;
    } else if (key == "shape") {
      field_ = Field::shape;
    } else if (key == "data_offsets") {
      field_ = Field::offsets;
    } else {
      fail_entry("has unknown field {}", shown_key(key));
    }
    unsigned bit = 1U << static_cast<unsigned>(field_);
    if ((seen_ & bit) != 0) fail_entry("has a duplicate field {}", ptepack::quoted(key));
    seen_ |= bit;
    return true;
  }

  bool set_dtype(const std::string& code) {
    auto dtype = dtype_from_safetensors(code);
    if (!dtype) {
      fail_entry(
          "has unsupported dtype {} (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL "
          "U16 U32 U64)",
          shown_key(code));
    }
    dtype_ = *dtype;
    return true;
  }

  bool add_dim(uint64_t value) {
    if (shape_.size() >= Limits::max_rank) fail_entry("has more than {} dims", Limits::max_rank);
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail_entry("has dim {} in its shape, which does not fit int64", value);
    }
    shape_.push_back(static_cast<int64_t>(value));
    return true;
  }

  bool add_offset(uint64_t value) {
    if (offset_count_ >= 2) fail_entry("has more than 2 data_offsets");
    offsets_[offset_count_++] = value;
    return true;
  }

  void finish_entry() {
    for (auto [field, name] : {std::pair{Field::dtype, "dtype"}, std::pair{Field::shape, "shape"},
                               std::pair{Field::offsets, "data_offsets"}}) {
      if ((seen_ & (1U << static_cast<unsigned>(field))) == 0) fail_entry("has no \"{}\"", name);
    }
    if (offset_count_ != 2) fail_entry("has {} data_offsets, not [begin, end]", offset_count_);
    const uint64_t begin = offsets_[0];
    const uint64_t end = offsets_[1];
    if (begin > end) fail_entry("has data_offsets [{}, {}] that end before they begin", begin, end);
    auto nbytes = byte_size(dtype_, shape_);
    if (!nbytes) {
      fail_entry("has shape [{}], whose byte size overflows 64 bits", fmt::join(shape_, ", "));
    }
    if (end - begin != *nbytes) {
      fail_entry("has data_offsets [{}, {}] holding {} bytes, but {} [{}] needs {} bytes", begin,
                 end, end - begin, safetensors_code(dtype_), fmt::join(shape_, ", "), *nbytes);
    }
    if (end > data_size_) {
      fail_entry("has data_offsets [{}, {}] past the end of the data section ({} bytes)", begin,
                 end, data_size_);
    }
    auto [it, inserted] = out_.tensors.emplace(
        std::move(key_),
        TensorData{dtype_, std::move(shape_), {file_, out_.data_start + begin, *nbytes}});
    spans_.push_back({begin, end, &it->first});
    shape_ = {};
  }

  InputFilePtr file_;
  const std::string& context_;
  File& out_;
  uint64_t data_size_;
  uint64_t header_offset_;
  State state_ = State::start;
  bool in_metadata_ = false;
  bool seen_metadata_ = false;
  std::string metadata_key_;
  // The entry being parsed.
  std::string key_;
  Field field_ = Field::none;
  unsigned seen_ = 0;
  DType dtype_ = DType::BYTE;
  Shape shape_;
  uint64_t offsets_[2] = {0, 0};
  unsigned offset_count_ = 0;
  std::vector<Span> spans_;
};

}  // namespace

File read(const InputFilePtr& file, uint64_t offset, uint64_t size, const std::string& context) {
  if (!range_within(offset, size, file->size())) {
    fail_input("{}: {} bytes at offset {} lie outside the file ({} bytes)", context, size, offset,
               file->size());
  }
  if (size < 8) {
    fail_input("{}: {} bytes is too short for the 8-byte header length of a safetensors file",
               context, size);
  }
  uint8_t length_field[8];
  file->read_at(offset, length_field);
  const uint64_t header_size = load_u64(length_field);
  if (header_size > size - 8) {
    fail_input("{}: header length {} exceeds the {} bytes that follow the length field", context,
               header_size, size - 8);
  }
  if (header_size > Limits::max_header_bytes) {
    fail_input("{}: header length {} exceeds the limit of {} bytes", context, header_size,
               Limits::max_header_bytes);
  }
  std::vector<uint8_t> header = file->read_range(offset + 8, header_size);
  // As the reference reader: the JSON object starts the header (no BOM, no
  // leading whitespace) and only spaces may pad it; JSON text holds no raw NUL.
  if (!header.empty() &&
      (header.front() == 0xEF || header.front() == ' ' || header.front() == '\n' ||
       header.front() == '\r' || header.front() == '\t')) {
    fail_input("{}: header does not start with '{{' (a BOM or whitespace comes first)", context);
  }
  File out;
  out.data_start = offset + 8 + header_size;
  HeaderParser parser(file, context, out, size - 8 - header_size, offset + 8);
  if (!json::sax_parse(header.begin(), header.end(), &parser)) {
    fail_input("{}: invalid JSON header", context);  // unreachable: the parser throws instead
  }
  if (std::find(header.begin(), header.end(), uint8_t{0}) != header.end()) {
    fail_input("{}: header contains a NUL byte", context);
  }
  auto last = std::find_if(header.rbegin(), header.rend(), [](uint8_t c) { return c != ' '; });
  if (last == header.rend() || *last != '}') {
    fail_input("{}: header has bytes other than spaces after the JSON object", context);
  }
  parser.check_tiling();
  return out;
}

File read(const InputFilePtr& file) { return read(file, 0, file->size(), file->name()); }

namespace {

// The directory an index's shards resolve against, and the resolution rules: a shard name is a
// relative path without '..' that, after following symlinks, stays inside that directory.
std::filesystem::path resolve_shard(const std::filesystem::path& base, const std::string& name,
                                    const std::string& key, const std::string& context) {
  namespace fs = std::filesystem;
  if (name.empty()) fail_input("{}: key {} maps to an empty shard name", context, shown_key(key));
  if (name.find('\0') != std::string::npos) {
    fail_input("{}: shard name {} of key {} contains a NUL byte", context, ptepack::quoted(name),
               shown_key(key));
  }
  fs::path relative(name);
  if (relative.has_root_path()) {
    fail_input("{}: shard {} of key {} is an absolute path", context, ptepack::quoted(name),
               shown_key(key));
  }
  for (const auto& part : relative) {
    if (part == "..") {
      fail_input("{}: shard {} of key {} has a '..' component", context, ptepack::quoted(name),
                 shown_key(key));
    }
  }
  std::error_code error;
  fs::path resolved = fs::weakly_canonical(base / relative, error);
  if (error) {
    fail(ErrorCode::io, "{}: cannot resolve shard {}: {}", context, ptepack::quoted(name),
         error.message());
  }
  auto [base_end, unused] =
      std::mismatch(base.begin(), base.end(), resolved.begin(), resolved.end());
  if (base_end != base.end() || resolved == base) {
    fail_input("{}: shard {} of key {} resolves to {}, not to a file inside the index's directory",
               context, ptepack::quoted(name), shown_key(key), resolved.string());
  }
  return resolved;
}

struct ShardKeys {
  std::string name;               // as the weight_map spells it (the first spelling seen)
  std::vector<std::string> keys;  // sorted: the weight_map object iterates in key order
};

}  // namespace

TensorTable read_index(const std::filesystem::path& index_path) {
  namespace fs = std::filesystem;
  const std::string context = index_path.string();
  auto index_file = InputFile::open(index_path);
  if (index_file->size() > Limits::max_header_bytes) {
    fail_input("{}: index of {} bytes exceeds the limit of {} bytes", context, index_file->size(),
               Limits::max_header_bytes);
  }
  std::vector<uint8_t> text = index_file->read_range(0, index_file->size());
  json root = parse_json_strict(
      std::string_view(reinterpret_cast<const char*>(text.data()), text.size()), context);
  if (!root.is_object()) fail_input("{}: index is not a JSON object", context);
  if (auto metadata = root.find("metadata"); metadata != root.end() && !metadata->is_object()) {
    fail_input("{}: \"metadata\" is not an object", context);
  }
  auto weight_map = root.find("weight_map");
  if (weight_map == root.end()) fail_input("{}: index has no \"weight_map\"", context);
  if (!weight_map->is_object()) fail_input("{}: \"weight_map\" is not an object", context);
  if (weight_map->size() > Limits::max_keys) {
    fail_input("{}: weight_map has more than {} keys", context, Limits::max_keys);
  }

  std::error_code error;
  fs::path base = fs::weakly_canonical(fs::absolute(index_path).parent_path(), error);
  if (error) fail(ErrorCode::io, "{}: cannot resolve its directory: {}", context, error.message());
  // Keyed by resolved path, so two spellings of one file still open and check it once.
  std::map<fs::path, ShardKeys> shards;
  for (const auto& [key, value] : weight_map->items()) {
    check_key(key, context);
    if (!value.is_string()) {
      fail_input("{}: weight_map value of {} is not a string", context, shown_key(key));
    }
    const auto& name = value.get_ref<const std::string&>();
    ShardKeys& shard = shards[resolve_shard(base, name, key, context)];
    if (shard.name.empty()) shard.name = name;
    shard.keys.push_back(key);
  }

  TensorTable out;
  for (auto& [path, shard] : shards) {
    if (std::error_code missing; !fs::exists(path, missing)) {
      fail(ErrorCode::io, "{}: shard {} (holding {}) does not exist: {}", context,
           ptepack::quoted(shard.name), shown_key(shard.keys.front()), path.string());
    }
    File file = read(InputFile::open(path));
    for (const std::string& key : shard.keys) {
      if (!file.tensors.contains(key)) {
        fail_input("{}: key {} is mapped to shard {}, which does not contain it", context,
                   shown_key(key), ptepack::quoted(shard.name));
      }
    }
    if (file.tensors.size() != shard.keys.size()) {
      for (const auto& [key, tensor] : file.tensors) {
        if (std::binary_search(shard.keys.begin(), shard.keys.end(), key)) continue;
        auto listed = weight_map->find(key);
        fail_input("{}: shard {} holds {}, which the weight_map {}", context,
                   ptepack::quoted(shard.name), shown_key(key),
                   listed == weight_map->end()
                       ? std::string("does not list")
                       : fmt::format("maps to {}",
                                     ptepack::quoted(listed->get_ref<const std::string&>())));
      }
    }
    out.merge(file.tensors);
  }
  return out;
}

// --- Writing: the header text and the layout ----------------------------------------------------

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
