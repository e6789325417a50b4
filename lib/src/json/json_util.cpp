// Strict JSON for untrusted files: a SAX-built DOM that rejects duplicate keys and deep nesting.
#include "json/json_util.h"

#include <vector>

#include "ptepack/base/error.h"
#include "ptepack/base/limits.h"

namespace ptepack {

using json = nlohmann::json;

std::string shown_key(std::string_view key) {
  // Keys are bounded only by the header size: never paste megabytes into a one-line message.
  constexpr size_t kShown = 200;
  if (key.size() <= kShown) return quote(key);
  return fmt::format("{}... ({} bytes)", quote(key.substr(0, kShown)), key.size());
}

[[noreturn]] void fail_json_syntax(const std::string& context, uint64_t base, size_t position,
                                   const std::string& what) {
  // nlohmann's text is "[json.exception.parse_error.N] parse error at line L, column C: <reason>;
  // last read: '<token>'; expected <x>". Keep the reason and the expectation, drop the echoed
  // token: it may be megabytes long or hold the very bytes that are not UTF-8.
  std::string reason = what;
  if (auto column = reason.find(", column "); column != std::string::npos) {
    if (auto colon = reason.find(": ", column); colon != std::string::npos) {
      reason.erase(0, colon + 2);
    }
  }
  if (auto last = reason.find("; last read: "); last != std::string::npos) {
    auto expected = reason.rfind("; expected ");
    std::string tail =
        expected != std::string::npos && expected > last ? reason.substr(expected) : "";
    reason = reason.substr(0, last) + tail;
  }
  // The SAX position counts bytes read; the offending byte is the last one read.
  uint64_t at = base + (position > 0 ? position - 1 : 0);
  fail_input("{}: invalid JSON at offset {}: {}", context, at, reason);
}

namespace {

// Builds a DOM like nlohmann's own SAX DOM parser, but rejects duplicate keys (nlohmann keeps the
// last one silently) and nesting deeper than Limits::max_json_depth. nlohmann's parser is
// iterative, so `[[[[...` of any depth reaches open() without recursion.
class StrictDomBuilder {
 public:
  StrictDomBuilder(json& root, const std::string& context) : root_(root), context_(context) {}

  bool null() { return put(nullptr); }
  bool boolean(bool value) { return put(value); }
  bool number_integer(json::number_integer_t value) { return put(value); }
  bool number_unsigned(json::number_unsigned_t value) { return put(value); }
  bool number_float(json::number_float_t value, const json::string_t&) { return put(value); }
  bool string(json::string_t& value) { return put(std::move(value)); }
  bool binary(json::binary_t& value) { return put(json::binary(std::move(value))); }
  bool start_object(std::size_t) { return open(json::value_t::object); }
  bool start_array(std::size_t) { return open(json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& key) {
    auto& members = stack_.back()->get_ref<json::object_t&>();
    auto [it, fresh] = members.emplace(std::move(key), nullptr);  // one lookup
    if (!fresh) fail_input("{}: duplicate key {}", context_, shown_key(it->first));
    slot_ = &it->second;  // std::map nodes stay put while siblings are added
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const json::exception& ex) {
    fail_json_syntax(context_, 0, position, ex.what());
  }

 private:
  json* place(json value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      // Only the last element can be an open container, so growing the array never moves a
      // container that is still on the stack.
      parent.push_back(std::move(value));
      return &parent.back();
    }
    *slot_ = std::move(value);
    return slot_;
  }
  bool put(json value) {
    place(std::move(value));
    return true;
  }
  bool open(json::value_t type) {
    if (stack_.size() >= static_cast<size_t>(Limits::max_json_depth)) {
      fail_input("{}: JSON nested deeper than {} levels", context_, Limits::max_json_depth);
    }
    stack_.push_back(place(json(type)));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  json& root_;
  const std::string& context_;
  std::vector<json*> stack_;
  json* slot_ = nullptr;
};

}  // namespace

nlohmann::json parse_json_strict(std::string_view text, const std::string& context) {
  json root;
  StrictDomBuilder builder(root, context);
  if (!json::sax_parse(text.begin(), text.end(), &builder)) {
    fail_input("{}: invalid JSON", context);  // unreachable: the builder throws instead
  }
  return root;
}

std::string json_text(const nlohmann::json& value) {
  return value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ptepack
