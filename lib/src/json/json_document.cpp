// The compact JSON document: a strict recursive-descent parser (depth bounded
// by Limits::max_json_depth) feeding one arena.
#include "json/json_document.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <unordered_set>

#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "ptepack/base/limits.h"
#include "json/json_util.h"

namespace ptepack {
namespace {

constexpr size_t kBlockBytes = size_t{1} << 20;
constexpr size_t kFirstBlockBytes = size_t{4} << 10;
// Objects with more members than this check duplicate keys in a hashed set.
constexpr size_t kScannedKeys = 16;

// Children are gathered on one scratch stack while their container is open,
// then copied into the arena as one contiguous array when it closes.
class Builder {
 public:
  Builder(JsonDocument& doc, JsonValue& root, const std::string& context)
      : doc_(doc), root_(root), context_(context) {}

  void put(JsonValue value) {
    if (frames_.empty()) {
      root_ = value;
    } else {
      scratch_.push_back({frames_.back().object ? key_ : std::string_view{}, value});
    }
  }

  void key(std::string_view key) {
    auto& frame = frames_.back();
    size_t count = scratch_.size() - frame.start;
    if (!frame.keys && count < kScannedKeys) {
      for (size_t i = frame.start; i < scratch_.size(); ++i) {
        if (scratch_[i].key == key) duplicate(key);
      }
    } else {
      if (!frame.keys) {
        frame.keys = std::make_unique<std::unordered_set<std::string_view>>();
        for (size_t i = frame.start; i < scratch_.size(); ++i) frame.keys->insert(scratch_[i].key);
      }
      if (!frame.keys->insert(key).second) duplicate(key);
    }
    key_ = key;
  }

  void open(bool object) {
    if (frames_.size() >= static_cast<size_t>(Limits::max_json_depth)) {
      fail_input("{}: JSON nested deeper than {} levels", context_, Limits::max_json_depth);
    }
    bool in_object = !frames_.empty() && frames_.back().object;
    frames_.push_back({scratch_.size(), object, in_object ? key_ : std::string_view{}, nullptr});
  }

  void close() {
    auto frame = std::move(frames_.back());
    frames_.pop_back();
    const size_t count = scratch_.size() - frame.start;
    auto first = scratch_.begin() + static_cast<std::ptrdiff_t>(frame.start);
    JsonValue value;
    if (frame.object) {
      auto* members = static_cast<JsonMember*>(doc_.allocate(count * sizeof(JsonMember)));
      std::uninitialized_copy(first, scratch_.end(), members);
      value = JsonValue::span(JsonType::object, members, count);
    } else {
      auto* items = static_cast<JsonValue*>(doc_.allocate(count * sizeof(JsonValue)));
      std::transform(first, scratch_.end(), items, [](const JsonMember& m) { return m.value; });
      value = JsonValue::span(JsonType::array, items, count);
    }
    scratch_.erase(first, scratch_.end());
    key_ = frame.key;
    put(value);
  }

 private:
  struct Frame {
    size_t start;  // first child in scratch_
    bool object;
    std::string_view key;  // this container's own key in its parent object
    std::unique_ptr<std::unordered_set<std::string_view>> keys;
  };

  [[noreturn]] void duplicate(std::string_view key) const {
    fail_input("{}: duplicate key {}", context_, shown_key(key));
  }

  JsonDocument& doc_;
  JsonValue& root_;
  const std::string& context_;
  std::vector<Frame> frames_;
  std::vector<JsonMember> scratch_;
  std::string_view key_;  // of the next value of the innermost object
};

// RFC 8259 JSON, as nlohmann's parser accepts it: no comments, no trailing
// commas, strings of valid UTF-8 without raw control characters, surrogate
// escapes only in pairs, and one leading UTF-8 byte order mark skipped.
class Parser {
 public:
  Parser(std::string_view text, JsonDocument& doc, Builder& out, const std::string& context)
      : begin_(text.data()),
        p_(text.data()),
        end_(text.data() + text.size()),
        doc_(doc),
        out_(out),
        context_(context) {}

  void parse() {
    if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) p_ += 3;
    value();
    space();
    if (p_ != end_) error("unexpected character after the value; expected end of input");
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    fail_input("{}: invalid JSON at offset {}: {}", context_, p_ - begin_, what);
  }

  void space() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  void value() {
    space();
    if (p_ == end_) error("unexpected end of input; expected a value");
    switch (*p_) {
      case '{':
      case '[':
        container(*p_ == '{');
        return;
      case '"': {
        auto text = string();
        out_.put(JsonValue::span(JsonType::string, text.data(), text.size()));
        return;
      }
      case 't':
        literal("true");
        out_.put(JsonValue::scalar(JsonType::boolean, true));
        return;
      case 'f':
        literal("false");
        out_.put(JsonValue::scalar(JsonType::boolean, false));
        return;
      case 'n':
        literal("null");
        out_.put(JsonValue::scalar(JsonType::null));
        return;
      default:
        if (*p_ == '-' || digit(*p_)) {
          number();
          return;
        }
        error("unexpected character; expected a value");
    }
  }

  void literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      error(fmt::format("invalid literal; expected '{}'", word));
    }
    p_ += word.size();
  }

  // An object or an array, from its opening bracket at p_.
  void container(bool object) {
    const char closer = object ? '}' : ']';
    out_.open(object);
    ++p_;
    space();
    if (p_ != end_ && *p_ == closer) {
      ++p_;
      out_.close();
      return;
    }
    while (true) {
      if (object) {
        member();
      } else {
        value();
      }
      space();
      if (p_ != end_ && *p_ == ',') {
        ++p_;
        continue;
      }
      if (p_ != end_ && *p_ == closer) {
        ++p_;
        out_.close();
        return;
      }
      error(object ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array");
    }
  }

  void member() {
    space();
    if (p_ == end_ || *p_ != '"') error("expected a string as an object key");
    out_.key(string());
    space();
    if (p_ == end_ || *p_ != ':') error("expected ':' after an object key");
    ++p_;
    value();
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  // The string at p_ (its opening quote). Without escapes it is a view of the
  // text itself; with them, decoded into the arena.
  std::string_view string() {
    const char* start = ++p_;
    bool ascii = true;
    while (p_ != end_ && *p_ != '"' && *p_ != '\\') {
      auto c = static_cast<unsigned char>(*p_);
      if (c < 0x20) error("control character in a string (escape it)");
      ascii = ascii && c < 0x80;
      ++p_;
    }
    if (p_ == end_) error("unexpected end of input in a string");
    if (*p_ == '"') {
      std::string_view text(start, static_cast<size_t>(p_ - start));
      if (!ascii) check_utf8(start, text);
      ++p_;
      return text;
    }
    decoded_.assign(start, p_);
    if (!ascii) check_utf8(start, decoded_);
    while (true) {
      if (p_ == end_) error("unexpected end of input in a string");
      char c = *p_;
      if (c == '"') break;
      if (c == '\\') {
        escape();
        continue;
      }
      const char* run = p_;
      bool run_ascii = true;
      while (p_ != end_ && *p_ != '"' && *p_ != '\\') {
        auto u = static_cast<unsigned char>(*p_);
        if (u < 0x20) error("control character in a string (escape it)");
        run_ascii = run_ascii && u < 0x80;
        ++p_;
      }
      std::string_view text(run, static_cast<size_t>(p_ - run));
      if (!run_ascii) check_utf8(run, text);
      decoded_.append(text);
    }
    ++p_;
    auto* bytes = static_cast<char*>(doc_.allocate(decoded_.size()));
    if (!decoded_.empty()) std::memcpy(bytes, decoded_.data(), decoded_.size());
    return {bytes, decoded_.size()};
  }

  void check_utf8(const char* start, std::string_view text) {
    if (is_utf8(text)) return;
    p_ = start;
    error("invalid UTF-8 in a string");
  }

  uint32_t hex4() {
    if (end_ - p_ < 4) error("unexpected end of input in a \\u escape");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i, ++p_) {
      char c = *p_;
      uint32_t v = digit(c)                 ? static_cast<uint32_t>(c - '0')
                   : (c >= 'a' && c <= 'f') ? static_cast<uint32_t>(c - 'a' + 10)
                   : (c >= 'A' && c <= 'F') ? static_cast<uint32_t>(c - 'A' + 10)
                                            : 16;
      if (v == 16) error("\\u must be followed by 4 hex digits");
      code = (code << 4) | v;
    }
    return code;
  }

  void escape() {
    ++p_;  // the backslash
    if (p_ == end_) error("unexpected end of input in a string");
    char c = *p_++;
    switch (c) {
      case '"':
        decoded_ += '"';
        return;
      case '\\':
        decoded_ += '\\';
        return;
      case '/':
        decoded_ += '/';
        return;
      case 'b':
        decoded_ += '\b';
        return;
      case 'f':
        decoded_ += '\f';
        return;
      case 'n':
        decoded_ += '\n';
        return;
      case 'r':
        decoded_ += '\r';
        return;
      case 't':
        decoded_ += '\t';
        return;
      case 'u':
        break;
      default:
        --p_;
        error("invalid escape in a string");
    }
    uint32_t code = hex4();
    if (code >= 0xDC00 && code <= 0xDFFF) error("a low surrogate must follow a high surrogate");
    if (code >= 0xD800 && code <= 0xDBFF) {
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u')
        error("a high surrogate must be followed by a low surrogate");
      p_ += 2;
      uint32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF)
        error("a high surrogate must be followed by a low surrogate");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(code);
  }

  void append_utf8(uint32_t code) {
    auto byte = [](uint32_t v) { return static_cast<char>(static_cast<unsigned char>(v)); };
    if (code < 0x80) {
      decoded_ += byte(code);
    } else if (code < 0x800) {
      decoded_ += byte(0xC0 | (code >> 6));
      decoded_ += byte(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      decoded_ += byte(0xE0 | (code >> 12));
      decoded_ += byte(0x80 | ((code >> 6) & 0x3F));
      decoded_ += byte(0x80 | (code & 0x3F));
    } else {
      decoded_ += byte(0xF0 | (code >> 18));
      decoded_ += byte(0x80 | ((code >> 12) & 0x3F));
      decoded_ += byte(0x80 | ((code >> 6) & 0x3F));
      decoded_ += byte(0x80 | (code & 0x3F));
    }
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; an integer that fits in
  // 64 bits is kept exactly (unsigned when not negative), as nlohmann does;
  // any other number is a double, refused when it overflows (nlohmann's
  // "number overflow"; an underflow reads as zero).
  void number() {
    const char* start = p_;
    bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_ || !digit(*p_)) error("expected a digit in a number");
    const char* digits = p_;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ != end_ && digit(*p_)) ++p_;
    }
    const char* digits_end = p_;
    const char* fraction = nullptr;
    const char* fraction_end = nullptr;
    int64_t exponent = 0;
    bool integral = true;
    if (p_ != end_ && *p_ == '.') {
      integral = false;
      fraction = ++p_;
      if (p_ == end_ || !digit(*p_)) error("expected a digit after '.' in a number");
      while (p_ != end_ && digit(*p_)) ++p_;
      fraction_end = p_;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      integral = false;
      ++p_;
      bool minus = p_ != end_ && *p_ == '-';
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !digit(*p_)) error("expected a digit in a number's exponent");
      for (; p_ != end_ && digit(*p_); ++p_) {
        exponent = std::min<int64_t>(exponent * 10 + (*p_ - '0'), int64_t{1} << 40);
      }
      if (minus) exponent = -exponent;
    }
    if (integral) {
      uint64_t value = 0;
      bool fits = true;
      for (const char* d = digits; d != digits_end && fits; ++d) {
        auto v = static_cast<uint64_t>(*d - '0');
        fits = value <= (UINT64_MAX - v) / 10;
        value = value * 10 + v;
      }
      if (fits && !negative) {
        out_.put(JsonValue::scalar(JsonType::unsigned_integer, false, value));
        return;
      }
      if (fits && value <= uint64_t{1} << 63) {
        out_.put(JsonValue::scalar(JsonType::integer));
        return;
      }
    }
    double parsed = 0;
    auto result = std::from_chars(start, p_, parsed);
    if (result.ec == std::errc::result_out_of_range) {
      // Out of range both ways; the decimal exponent of the leading digit tells which.
      int64_t leading = 0;
      if (*digits != '0') {
        leading = digits_end - digits - 1;
      } else if (fraction != nullptr) {
        const char* nonzero = std::find_if(fraction, fraction_end, [](char c) { return c != '0'; });
        leading = -(nonzero - fraction) - 1;
      }
      if (leading + exponent > 0) {
        p_ = start;
        error("number overflow (beyond a 64-bit double)");
      }
    }
    out_.put(JsonValue::scalar(JsonType::floating));
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  JsonDocument& doc_;
  Builder& out_;
  const std::string& context_;
  std::string decoded_;  // a string with escapes, while it is decoded
};

}  // namespace

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& member : object()) {
    if (member.key == key) return &member.value;
  }
  return nullptr;
}

void* JsonDocument::allocate(size_t bytes) {
  bytes = (bytes + 7) & ~size_t{7};  // every value type is 8-byte aligned
  if (bytes == 0) return nullptr;
  if (bytes > kBlockBytes / 4) {
    // A large string or array gets its own block, ahead of the one being filled.
    auto block = std::make_unique_for_overwrite<std::byte[]>(bytes);
    void* out = block.get();
    blocks_.insert(blocks_.empty() ? blocks_.end() : blocks_.end() - 1, std::move(block));
    return out;
  }
  if (blocks_.empty() || capacity_ - used_ < bytes) {
    // Blocks double from a size set by the text, so a small document never
    // pays for a large block; nothing is zero-filled, as the parser writes
    // every byte it hands out.
    capacity_ = std::max(next_block_, bytes);
    next_block_ = std::min(kBlockBytes, capacity_ * 2);
    blocks_.push_back(std::make_unique_for_overwrite<std::byte[]>(capacity_));
    used_ = 0;
  }
  void* out = blocks_.back().get() + used_;
  used_ += bytes;
  return out;
}

JsonDocument::JsonDocument(std::string_view text, const std::string& context)
    : next_block_(std::clamp(text.size(), kFirstBlockBytes, kBlockBytes)) {
  Builder builder(*this, root_, context);
  Parser(text, *this, builder, context).parse();
}

std::vector<const JsonMember*> sorted_members(const JsonValue& object) {
  std::vector<const JsonMember*> out;
  auto members = object.object();
  out.reserve(members.size());
  for (const auto& m : members) out.push_back(&m);
  auto by_key = [](const JsonMember* a, const JsonMember* b) { return a->key < b->key; };
  if (!std::is_sorted(out.begin(), out.end(), by_key)) std::sort(out.begin(), out.end(), by_key);
  return out;
}

}  // namespace ptepack
