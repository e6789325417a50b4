// The JSON form of a program read in one streaming pass straight into a FlatBuffer.
//
// FlatBuffers' own text parser keeps every parsed scalar as a std::string on a field stack
// (about 60 bytes per list element) and formats each table offset through a stringstream,
// so a 48 MB program took seconds and hundreds of MB. This reader walks the text once with
// the field definitions of the built-in schema (flatbuffers::Parser's StructDef/FieldDef,
// parsed once), builds every child before its parent as FlatBuffers requires, and pushes
// list elements straight into the builder. Memory: the finished buffer plus one small
// frame per open table.
//
// Accepted language (the flatc JSON form, strict or not), see docs/format-ptg.md:
// objects with quoted ('"' or '\'') or bare field names; trailing commas; // and /* */
// comments; `null` for an absent field; scalars bare or quoted; integers decimal or 0x hex;
// doubles also nan/inf; bools true/false/0/1; enums by name or value; a union's `_type`
// before or after its value. One root object, then only whitespace and comments.
#include <flatbuffers/idl.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "graph/program_json.h"
#include "graph/program_json_lexer.h"

#include "graph/builder_memory.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "ptepack/graph/program.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack {
namespace detail {
extern const std::string_view kProgramSchemaText;
}

namespace {

using flatbuffers::BaseType;
using flatbuffers::FieldDef;
using flatbuffers::StructDef;

// Objects and lists open at once; the binary verifier allows the same depth.
constexpr int kMaxNesting = 512;

using detail::JsonLexer;

class JsonProgramReader : protected JsonLexer {
 public:
  JsonProgramReader(std::string_view text, const std::string& context)
      // The binary is about as large as the text.
      : JsonLexer(text, context), builder_(detail::reserved_builder(text.size())) {
    builder_.ForceDefaults(true);  // a field given in the text is stored, default or not
  }

  flatbuffers::DetachedBuffer read(const StructDef& root, const char* identifier) {
    skip_space();
    auto offset = table(root);
    skip_space();
    if (pos_ != text_.size()) error("unexpected text after the program object");
    builder_.Finish(flatbuffers::Offset<void>(offset), identifier);
    return builder_.Release();
  }

 private:
  // One field given in the current table: a scalar's bits or a child's offset.
  struct Given {
    const FieldDef* field;
    uint64_t bits = 0;
    flatbuffers::uoffset_t offset = 0;
    size_t deferred_at = std::string_view::npos;  // a union value seen before its _type
  };

  // --- scalars ------------------------------------------------------------------------

  [[noreturn]] void bad_scalar(size_t at, const FieldDef& field, std::string_view text,
                               std::string_view wanted) const {
    error_at(at, fmt::format("field {}: {} is not {}", quote(field.name), quote(text.substr(0, 64)),
                             wanted));
  }

  // The bits of one scalar of `type` (the field or list element) as the builder stores it.
  uint64_t scalar(const FieldDef& field, const flatbuffers::Type& type, BaseType base) {
    size_t at = (skip_space(), pos_);
    std::string_view text = scalar_token();
    if (base == BaseType::BASE_TYPE_DOUBLE || base == BaseType::BASE_TYPE_FLOAT) {
      double value = 0;
      if (text == "nan" || text == "+nan" || text == "-nan") {
        value = std::numeric_limits<double>::quiet_NaN();
      } else if (text == "inf" || text == "+inf" || text == "infinity" || text == "+infinity") {
        value = std::numeric_limits<double>::infinity();
      } else if (text == "-inf" || text == "-infinity") {
        value = -std::numeric_limits<double>::infinity();
      } else {
        std::string_view digits = text.starts_with('+') ? text.substr(1) : text;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
          int64_t integer = 0;
          if (!integer_of(text, integer)) bad_scalar(at, field, text, "a number");
          value = static_cast<double>(integer);
        }
      }
      if (base == BaseType::BASE_TYPE_FLOAT) {
        float narrow = static_cast<float>(value);
        uint32_t bits = 0;
        std::memcpy(&bits, &narrow, sizeof bits);
        return bits;
      }
      uint64_t bits = 0;
      std::memcpy(&bits, &value, sizeof bits);
      return bits;
    }
    if (base == BaseType::BASE_TYPE_BOOL) {
      if (text == "true" || text == "1") return 1;
      if (text == "false" || text == "0") return 0;
      bad_scalar(at, field, text, "a boolean (true, false, 1 or 0)");
    }
    auto too_wide = [&] {
      error_at(at, fmt::format("field {}: {} does not fit in a {}-bit field", quote(field.name),
                               escaped(text.substr(0, 64)), flatbuffers::SizeOf(base) * 8));
    };
    int64_t value = 0;
    if (!integer_of(text, value)) {
      if (looks_integral(text)) too_wide();
      const auto* enum_def = type.enum_def;
      const auto* named = enum_def != nullptr ? enum_def->Lookup(std::string(text)) : nullptr;
      if (named == nullptr) {
        bad_scalar(at, field, text,
                   enum_def != nullptr ? fmt::format("a value of {}", enum_def->name)
                                       : std::string("an integer"));
      }
      value = named->GetAsInt64();
    }
    auto range = integer_range(base);
    if (!range) error_at(at, fmt::format("field {}: unsupported scalar type", quote(field.name)));
    if (value < range->first || value > range->second) too_wide();
    return static_cast<uint64_t>(value);
  }

  // --- values -------------------------------------------------------------------------

  void check_size() const {
    if (builder_.GetSize() > Limits::max_program_bytes) {
      error(fmt::format("program exceeds the limit of {} bytes", Limits::max_program_bytes));
    }
  }

  flatbuffers::uoffset_t string_value(const FieldDef& field) {
    skip_space();
    if (peek() != '"' && peek() != '\'') {
      error(fmt::format("field {}: expected a string", quote(field.name)));
    }
    string_into(token_);
    auto offset = builder_.CreateString(token_).o;
    check_size();
    return offset;
  }

  template <typename T>
  void push_scalar(uint64_t bits) {
    T value;
    if constexpr (sizeof(T) == 8) {
      std::memcpy(&value, &bits, sizeof value);
    } else {
      auto narrow = static_cast<std::make_unsigned_t<T>>(bits);
      std::memcpy(&value, &narrow, sizeof value);
    }
    builder_.PushElement(value);
  }

  // A list of scalars of 4 or 8 bytes goes into the builder as it is read (the builder grows
  // downwards, so the elements are reversed in place afterwards); narrower ones are collected
  // first, because their length decides the padding in front of them.
  template <typename T>
  flatbuffers::uoffset_t scalar_list(const FieldDef& field, const flatbuffers::Type& element) {
    size_t count = 0;
    if constexpr (sizeof(T) >= 4) {
      builder_.StartVector(0, sizeof(T));
      if (opens_items(']')) {
        do {
          push_scalar<T>(scalar(field, element, element.base_type));
          ++count;
          if ((count & 0xFFFF) == 0) check_size();
        } while (next_item(']'));
      }
      auto* first = reinterpret_cast<T*>(builder_.GetCurrentBufferPointer());
      std::reverse(first, first + count);
      auto offset = builder_.EndVector(count);
      check_size();
      return offset;
    } else {
      small_.clear();
      if (opens_items(']')) {
        do small_.push_back(scalar(field, element, element.base_type));
        while (next_item(']'));
      }
      builder_.StartVector(small_.size(), sizeof(T));
      for (auto it = small_.rbegin(); it != small_.rend(); ++it) push_scalar<T>(*it);
      auto offset = builder_.EndVector(small_.size());
      check_size();
      return offset;
    }
  }

  // After an opening '[' or '{': false (and the closer consumed) when it is empty.
  bool opens_items(char closer) {
    skip_space();
    if (peek() == closer && !at_end()) {
      ++pos_;
      return false;
    }
    return true;
  }

  flatbuffers::uoffset_t list(const FieldDef& field) {
    const auto& element = field.value.type.VectorType();
    expect('[');
    Nesting nesting(*this);
    switch (element.base_type) {
      case BaseType::BASE_TYPE_BOOL:
      case BaseType::BASE_TYPE_UCHAR:
        return scalar_list<uint8_t>(field, element);
      case BaseType::BASE_TYPE_CHAR:
        return scalar_list<int8_t>(field, element);
      case BaseType::BASE_TYPE_INT:
        return scalar_list<int32_t>(field, element);
      case BaseType::BASE_TYPE_LONG:
        return scalar_list<int64_t>(field, element);
      case BaseType::BASE_TYPE_DOUBLE:
        return scalar_list<double>(field, element);
      case BaseType::BASE_TYPE_STRING:
      case BaseType::BASE_TYPE_STRUCT: {
        size_t base = offsets_.size();
        if (opens_items(']')) {
          do {
            offsets_.push_back(element.base_type == BaseType::BASE_TYPE_STRING
                                   ? string_value(field)
                                   : table(*element.struct_def));
          } while (next_item(']'));
        }
        size_t count = offsets_.size() - base;
        builder_.StartVector(count, sizeof(flatbuffers::uoffset_t));
        for (size_t i = offsets_.size(); i > base; --i) {
          builder_.PushElement(flatbuffers::Offset<void>(offsets_[i - 1]));
        }
        offsets_.resize(base);
        auto offset = builder_.EndVector(count);
        check_size();
        return offset;
      }
      default:
        error(fmt::format("field {}: unsupported list type", quote(field.name)));
    }
  }

  struct Nesting {
    explicit Nesting(JsonProgramReader& reader) : reader_(reader) {
      if (++reader_.depth_ > kMaxNesting) {
        reader_.error(fmt::format("nested deeper than {} objects and lists", kMaxNesting));
      }
    }
    ~Nesting() { --reader_.depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;
    JsonProgramReader& reader_;
  };

  // The union value of `field`, whose member table is given by `tag` (its _type's value).
  flatbuffers::uoffset_t union_value(const FieldDef& field, uint64_t tag) {
    const auto* member = field.value.type.enum_def->ReverseLookup(static_cast<int64_t>(tag));
    if (member == nullptr || tag == 0 || member->union_type.struct_def == nullptr) {
      error(
          fmt::format("field {}: union type {} has no table for a value", quote(field.name), tag));
    }
    return table(*member->union_type.struct_def);
  }

  // Skips one JSON value (for a union value whose _type comes later).
  void skip_value() {
    skip_space();
    char c = peek();
    if (c == '{' || c == '[') {
      char closer = c == '{' ? '}' : ']';
      ++pos_;
      Nesting nesting(*this);
      skip_space();
      if (peek() == closer && !at_end()) {
        ++pos_;
        return;
      }
      do {
        if (closer == '}') {
          (void)field_name();
          expect(':');
        }
        skip_value();
      } while (next_item(closer));
      return;
    }
    if (c == '"' || c == '\'') {
      string_into(token_);
      return;
    }
    (void)scalar_token();
  }

  // The field called name + suffix. A scan of the table's few fields: no string
  // is built and no map walked for each of the millions of fields a program names.
  static const FieldDef* field_named(const StructDef& def, std::string_view name,
                                     std::string_view suffix = {}) {
    for (const FieldDef* field : def.fields.vec) {
      std::string_view n = field->name;
      if (n.size() == name.size() + suffix.size() && n.substr(0, name.size()) == name &&
          n.substr(name.size()) == suffix) {
        return field;
      }
    }
    return nullptr;
  }

  static const FieldDef* field_for_union(const StructDef& table_def, const FieldDef& type_field) {
    std::string_view suffix = flatbuffers::UnionTypeFieldSuffix();
    std::string_view name = type_field.name;
    return field_named(table_def, name.substr(0, name.size() - suffix.size()));
  }

  static const FieldDef* type_field_for(const StructDef& table_def, const FieldDef& union_field) {
    return field_named(table_def, union_field.name, flatbuffers::UnionTypeFieldSuffix());
  }

  Given* find_given(size_t base, const FieldDef* field) {
    for (size_t i = base; i < given_.size(); ++i) {
      if (given_[i].field == field) return &given_[i];
    }
    return nullptr;
  }

  flatbuffers::uoffset_t table(const StructDef& def) {
    expect('{');
    Nesting nesting(*this);
    size_t base = given_.size();
    if (opens_items('}')) {
      do {
        size_t name_at = (skip_space(), pos_);
        std::string_view name = field_name();
        const FieldDef* field = field_named(def, name);
        if (field == nullptr || field->deprecated) {
          error_at(name_at, fmt::format("unknown field {} in table {}", quote(name.substr(0, 64)),
                                        def.name));
        }
        expect(':');
        if (find_given(base, field) != nullptr) {
          error_at(name_at, fmt::format("field {} set more than once in table {}",
                                        quote(field->name), def.name));
        }
        if (null_literal()) continue;
        skip_space();
        value_into(def, *field, base);
      } while (next_item('}'));
    }
    for (size_t i = base; i < given_.size(); ++i) {
      if (given_[i].deferred_at != std::string_view::npos) {
        error_at(given_[i].deferred_at,
                 fmt::format("missing type field for the union value {} in table {}",
                             quote(given_[i].field->name), def.name));
      }
    }
    for (const FieldDef* field : def.fields.vec) {
      if (field->IsRequired() && find_given(base, field) == nullptr) {
        error(
            fmt::format("required field {} is missing in table {}", quote(field->name), def.name));
      }
    }
    auto start = builder_.StartTable();
    for (size_t i = base; i < given_.size(); ++i) add_field(given_[i]);
    given_.resize(base);
    auto offset = builder_.EndTable(start);
    check_size();
    return offset;
  }

  void value_into(const StructDef& def, const FieldDef& field, size_t base) {
    const auto& type = field.value.type;
    Given given{&field};
    switch (type.base_type) {
      case BaseType::BASE_TYPE_STRING:
        given.offset = string_value(field);
        break;
      case BaseType::BASE_TYPE_VECTOR:
        given.offset = list(field);
        break;
      case BaseType::BASE_TYPE_STRUCT:
        if (type.struct_def->fixed)
          error(fmt::format("field {}: structs are not supported", quote(field.name)));
        given.offset = table(*type.struct_def);
        break;
      case BaseType::BASE_TYPE_UNION: {
        const FieldDef* type_field = type_field_for(def, field);
        const Given* tag = type_field != nullptr ? find_given(base, type_field) : nullptr;
        if (tag == nullptr) {
          given.deferred_at = pos_;
          skip_value();
        } else {
          given.offset = union_value(field, tag->bits);
        }
        break;
      }
      case BaseType::BASE_TYPE_UTYPE: {
        given.bits = scalar(field, type, type.base_type);
        // A value that came first is read now, from where it was skipped.
        const FieldDef* union_field = field_for_union(def, field);
        given_.push_back(given);
        if (union_field != nullptr) {
          if (Given* value = find_given(base, union_field);
              value != nullptr && value->deferred_at != std::string_view::npos) {
            size_t resume = pos_;
            pos_ = value->deferred_at;
            size_t index = static_cast<size_t>(value - given_.data());
            auto offset = union_value(*union_field, given.bits);
            given_[index].offset = offset;
            given_[index].deferred_at = std::string_view::npos;
            pos_ = resume;
          }
        }
        return;
      }
      default:
        given.bits = scalar(field, type, type.base_type);
        break;
    }
    given_.push_back(given);
  }

  // Scalars are stored by width: `bits` already holds the value's two's-complement or IEEE
  // bytes in its low end.
  void add_field(const Given& given) {
    const FieldDef& field = *given.field;
    auto slot = field.value.offset;
    const auto base = field.value.type.base_type;
    if (!flatbuffers::IsScalar(base)) {
      builder_.AddOffset(slot, flatbuffers::Offset<void>(given.offset));
      return;
    }
    switch (flatbuffers::SizeOf(base)) {
      case 1:
        builder_.AddElement<uint8_t>(slot, static_cast<uint8_t>(given.bits), 0);
        break;
      case 2:
        builder_.AddElement<uint16_t>(slot, static_cast<uint16_t>(given.bits), 0);
        break;
      case 4:
        builder_.AddElement<uint32_t>(slot, static_cast<uint32_t>(given.bits), 0);
        break;
      default:
        builder_.AddElement<uint64_t>(slot, given.bits, 0);
        break;
    }
  }

  int depth_ = 0;
  flatbuffers::FlatBufferBuilder builder_;
  std::vector<Given> given_;                     // fields of every open table, innermost last
  std::vector<flatbuffers::uoffset_t> offsets_;  // elements of every open list of offsets
  std::vector<uint64_t> small_;                  // a list of 1-byte scalars being read
};

const flatbuffers::Parser& program_schema() {
  static const flatbuffers::Parser* parsed = [] {
    auto* parser = new flatbuffers::Parser();
    std::string schema(detail::kProgramSchemaText);
    if (!parser->Parse(schema.c_str()) || parser->root_struct_def_ == nullptr) {
      fail(ErrorCode::internal, "built-in program schema does not parse: {}", parser->error_);
    }
    return parser;
  }();
  return *parsed;
}

}  // namespace

flatbuffers::DetachedBuffer program_json_to_binary(std::string_view text,
                                                   const std::string& context) {
  const auto& schema = program_schema();
  return JsonProgramReader(text, context).read(*schema.root_struct_def_, nb::ProgramIdentifier());
}

}  // namespace ptepack
