// safetensors: strict header parsing (SAX, no DOM) of one file.
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "containers/safetensors_keys.h"
#include "base/byte_reader.h"
#include "base/checked.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "containers/safetensors.h"
#include "json/json_util.h"

namespace ptepack::safetensors {

using json = nlohmann::json;
using detail::check_key;

namespace {

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
    if ((seen_ & bit) != 0) fail_entry("has a duplicate field {}", quote(key));
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

}  // namespace ptepack::safetensors
