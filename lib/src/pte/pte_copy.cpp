// Schema-driven walk and copy of .pte flatbuffers through the generated type tables.
#include "pte/pte_copy.h"

#include <fmt/format.h>

#include <algorithm>

#include "ptepack/base/error.h"
#include "ptepack/pte/pte.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::pte::detail {
namespace {

namespace fb = flatbuffers;
namespace et = executorch_flatbuffer;

fb::voffset_t slot_offset(size_t slot) { return static_cast<fb::voffset_t>(4 + 2 * slot); }

size_t scalar_size(fb::ElementaryType type) {
  switch (type) {
    case fb::ET_SHORT:
    case fb::ET_USHORT:
      return 2;
    case fb::ET_INT:
    case fb::ET_UINT:
    case fb::ET_FLOAT:
    case fb::ET_STRING:
    case fb::ET_SEQUENCE:
      return 4;
    case fb::ET_LONG:
    case fb::ET_ULONG:
    case fb::ET_DOUBLE:
      return 8;
    default:
      return 1;
  }
}

bool is_signed(fb::ElementaryType type) {
  return type == fb::ET_CHAR || type == fb::ET_SHORT || type == fb::ET_INT || type == fb::ET_LONG;
}

// The raw bits of a scalar field (present in the vtable).
uint64_t raw_field(const fb::Table* table, fb::voffset_t field, size_t size) {
  switch (size) {
    case 1:
      return table->GetField<uint8_t>(field, 0);
    case 2:
      return table->GetField<uint16_t>(field, 0);
    case 4:
      return table->GetField<uint32_t>(field, 0);
    default:
      return table->GetField<uint64_t>(field, 0);
  }
}

int64_t as_value(uint64_t bits, size_t size, bool signed_type) {
  if (!signed_type) return static_cast<int64_t>(bits);
  const unsigned shift = static_cast<unsigned>(64 - 8 * size);
  return static_cast<int64_t>(bits << shift) >> shift;
}

bool in_enum(const fb::TypeTable* type, int64_t value) {
  if (type->values == nullptr) return value >= 0 && static_cast<size_t>(value) < type->num_elems;
  return std::find(type->values, type->values + type->num_elems, value) !=
         type->values + type->num_elems;
}

const fb::TypeTable* ref_of(const fb::TypeTable* type, const fb::TypeCode& code) {
  return code.sequence_ref < 0 ? nullptr : type->type_refs[code.sequence_ref]();
}

// The member table type of union tag `tag`, or null for NONE or an unknown tag.
const fb::TypeTable* union_member(const fb::TypeTable* union_type, uint64_t tag) {
  if (tag == 0 || !in_enum(union_type, static_cast<int64_t>(tag))) return nullptr;
  size_t index = static_cast<size_t>(tag);
  if (union_type->values != nullptr) {
    index = static_cast<size_t>(std::find(union_type->values,
                                          union_type->values + union_type->num_elems,
                                          static_cast<int64_t>(tag)) -
                                union_type->values);
  }
  return ref_of(union_type, union_type->type_codes[index]);
}

const char* field_name(const fb::TypeTable* type, size_t i) {
  return type->names != nullptr ? type->names[i] : "?";
}

struct Finder {
  std::vector<std::string>& out;
  size_t limit;
  std::string* misaligned = nullptr;  // set: look for misaligned 8-byte vectors instead

  void note(std::string text) {
    if (out.size() < limit) out.push_back(std::move(text));
  }

  void table(const fb::Table* t, const fb::TypeTable* type, const std::string& path) {
    if (t == nullptr) return;
    if (misaligned != nullptr ? !misaligned->empty() : out.size() >= limit) return;
    const uint8_t* vtable = t->GetVTable();
    const fb::voffset_t vsize = fb::ReadScalar<fb::voffset_t>(vtable);
    const size_t slots = vsize < 4 ? 0 : (vsize - 4u) / 2u;  // the verifier allows 0 and 2
    for (size_t s = type->num_elems; s < slots; ++s) {
      if (fb::ReadScalar<fb::voffset_t>(vtable + slot_offset(s)) != 0) {
        note(fmt::format("{}: field slot {} is beyond ptepack's schema", path, s));
        break;
      }
    }
    for (size_t i = 0; i < type->num_elems; ++i) {
      const auto field = slot_offset(i);
      if (!t->CheckField(field)) continue;
      const auto& code = type->type_codes[i];
      const auto base = static_cast<fb::ElementaryType>(code.base_type);
      const fb::TypeTable* ref = ref_of(type, code);
      const std::string where = path + "." + field_name(type, i);
      if (code.is_repeating) {
        if (misaligned != nullptr && scalar_size(base) == 8 && base != fb::ET_SEQUENCE &&
            base != fb::ET_STRING) {
          const auto* v = t->GetPointer<const fb::VectorOfAny*>(field);
          // (An empty vector has no values to misread; builders do not align it.)
          if (v != nullptr && v->size() > 0 && reinterpret_cast<uintptr_t>(v->Data()) % 8 != 0 &&
              misaligned->empty()) {
            *misaligned = where;
          }
          continue;
        }
        if (base == fb::ET_SEQUENCE && ref != nullptr && ref->st == fb::ST_TABLE) {
          const auto* v = t->GetPointer<const fb::Vector<fb::Offset<fb::Table>>*>(field);
          for (fb::uoffset_t k = 0; v != nullptr && k < v->size(); ++k) {
            table(v->Get(k), ref, fmt::format("{}[{}]", where, k));
          }
        }
        continue;  // no schema vector holds enums
      }
      if (base == fb::ET_UTYPE) {
        const uint64_t tag = raw_field(t, field, 1);
        if (tag == 0 && i + 1 < type->num_elems && t->CheckField(slot_offset(i + 1))) {
          // A copy keeps no table for NONE: the output would differ from the input.
          note(fmt::format("{}: union tag NONE with a {} table", where, field_name(type, i + 1)));
        } else if (tag != 0 && union_member(ref, tag) == nullptr) {
          note(fmt::format("{}: union tag {} is not in the schema", where, tag));
        } else if (tag != 0 && i + 1 < type->num_elems) {
          table(t->GetPointer<const fb::Table*>(slot_offset(i + 1)), union_member(ref, tag),
                path + "." + field_name(type, i + 1));
        }
        continue;
      }
      if (base == fb::ET_SEQUENCE) {
        if (ref != nullptr && ref->st == fb::ST_TABLE) {
          table(t->GetPointer<const fb::Table*>(field), ref, where);
        }
        continue;
      }
      if (ref != nullptr && ref->st == fb::ST_ENUM) {
        const size_t size = scalar_size(base);
        const int64_t value = as_value(raw_field(t, field, size), size, is_signed(base));
        if (!in_enum(ref, value))
          note(fmt::format("{}: value {} is not in the schema", where, value));
      }
    }
  }
};

bool force_aligned(const fb::TypeTable* type) {
  return type == et::BufferTypeTable() || type == et::BackendDelegateInlineDataTypeTable();
}

}  // namespace

void find_unknown(const fb::Table* root, const fb::TypeTable* type, std::vector<std::string>& out,
                  size_t limit) {
  Finder{out, limit}.table(root, type, "Program");
}

std::string find_misaligned(const fb::Table* root, const fb::TypeTable* type) {
  std::vector<std::string> unused;
  std::string found;
  Finder finder{unused, 0, &found};
  finder.table(root, type, "Program");
  return found;
}

void set_scalar(std::vector<Field>& fields, uint16_t slot, uint8_t size, uint64_t bits) {
  remove_field(fields, slot);
  fields.push_back({slot, false, size, bits, 0});
}

void set_offset(std::vector<Field>& fields, uint16_t slot, fb::uoffset_t offset) {
  remove_field(fields, slot);
  fields.push_back({slot, true, 4, 0, offset});
}

void remove_field(std::vector<Field>& fields, uint16_t slot) {
  std::erase_if(fields, [&](const Field& f) { return f.slot == slot; });
}

Copier::Copier(fb::FlatBufferBuilder& builder, Edit edit, Skip skip, uint64_t inline_alignment)
    : builder_(builder),
      edit_(std::move(edit)),
      skip_(std::move(skip)),
      inline_alignment_(inline_alignment) {
  builder_.ForceDefaults(true);
}

void Copier::room(uint64_t bytes) {
  // FlatBufferBuilder aborts past 2 GiB; fail cleanly well before that.
  if (builder_.GetSize() + bytes + 4096 > max_flatbuffer_bytes) {
    fail_input("the rewritten program would exceed the 2 GiB flatbuffer limit");
  }
}

fb::uoffset_t Copier::bytes(const uint8_t* data, size_t size, size_t alignment) {
  room(size + alignment);
  // ForceVectorAlignment's own padding, without its debug assertion that the
  // alignment is at most FLATBUFFERS_MAX_ALIGNMENT (32): inline data keeps up to
  // 4096, and the buffer is copied out whole, so only offsets from its end count.
  if (alignment > 1 && size > 0) builder_.PreAlign(size, alignment);
  builder_.StartVector(size, 1);
  if (size > 0) builder_.PushBytes(data, size);
  return builder_.EndVector(size);
}

fb::uoffset_t Copier::string(const std::string& text) {
  room(text.size() + 8);
  return builder_.CreateString(text).o;
}

fb::uoffset_t Copier::vector(const fb::Table* t, const fb::TypeTable* type, size_t index) {
  const auto field = slot_offset(index);
  const auto& code = type->type_codes[index];
  const auto base = static_cast<fb::ElementaryType>(code.base_type);
  if (base == fb::ET_STRING) {
    const auto* v = t->GetPointer<const fb::Vector<fb::Offset<fb::String>>*>(field);
    std::vector<fb::Offset<fb::String>> items;
    for (fb::uoffset_t k = 0; k < v->size(); ++k) items.push_back(string(v->Get(k)->str()));
    room(4 * items.size() + 8);
    return builder_.CreateVector(items).o;
  }
  if (base == fb::ET_SEQUENCE) {
    const auto* v = t->GetPointer<const fb::Vector<fb::Offset<fb::Table>>*>(field);
    const fb::TypeTable* ref = ref_of(type, code);
    std::vector<fb::Offset<fb::Table>> items;
    for (fb::uoffset_t k = 0; k < v->size(); ++k) items.push_back(copy(v->Get(k), ref));
    room(4 * items.size() + 8);
    return builder_.CreateVector(items).o;
  }
  const size_t size = scalar_size(base);
  const auto* v = t->GetPointer<const fb::VectorOfAny*>(field);
  const size_t count = v->size();
  if (size == 1) {
    return bytes(v->Data(), count, force_aligned(type) ? inline_alignment_ : 0);
  }
  room(count * size + 16);
  builder_.StartVector(count, size);
  if (count > 0) builder_.PushBytes(v->Data(), count * size);
  return builder_.EndVector(count);
}

fb::uoffset_t Copier::copy(const fb::Table* t, const fb::TypeTable* type) {
  const auto id = std::make_pair(static_cast<const void*>(t), static_cast<const void*>(type));
  if (auto it = copies_.find(id); it != copies_.end()) return it->second;
  std::vector<Field> fields;
  for (size_t i = 0; i < type->num_elems; ++i) {
    const auto field = slot_offset(i);
    if (!t->CheckField(field)) continue;
    const auto& code = type->type_codes[i];
    const auto base = static_cast<fb::ElementaryType>(code.base_type);
    const auto slot = static_cast<uint16_t>(i);
    if (skip_ && skip_(t, type, slot)) {
      set_offset(fields, slot, 0);
    } else if (code.is_repeating) {
      set_offset(fields, slot, vector(t, type, i));
    } else if (base == fb::ET_STRING) {
      set_offset(fields, slot, string(t->GetPointer<const fb::String*>(field)->str()));
    } else if (base == fb::ET_SEQUENCE) {
      const fb::TypeTable* ref = ref_of(type, code);
      const fb::TypeTable* member = ref;
      if (ref->st == fb::ST_UNION) {
        // The tag is the field before; an unknown tag was refused before copying.
        member = union_member(ref, raw_field(t, slot_offset(i - 1), 1));
        if (member == nullptr) continue;
      }
      set_offset(fields, slot, copy(t->GetPointer<const fb::Table*>(field), member));
    } else {
      const size_t size = scalar_size(base);
      set_scalar(fields, slot, static_cast<uint8_t>(size), raw_field(t, field, size));
    }
  }
  if (edit_) edit_(t, type, fields);
  const auto out = table(std::move(fields));
  copies_.emplace(id, out);
  return out;
}

fb::uoffset_t Copier::table(std::vector<Field> fields) {
  // Widest first, then by slot: the order decides the bytes, so it is fixed.
  std::sort(fields.begin(), fields.end(), [](const Field& a, const Field& b) {
    return a.size != b.size ? a.size > b.size : a.slot < b.slot;
  });
  room(16 * fields.size() + 16);
  const auto start = builder_.StartTable();
  for (const Field& f : fields) {
    const auto field = slot_offset(f.slot);
    if (f.is_offset && f.offset == 0) {
      fail(ErrorCode::internal, "program rewrite left field slot {} unset", f.slot);
    }
    if (f.is_offset) {
      builder_.AddOffset(field, fb::Offset<void>(f.offset));
      continue;
    }
    switch (f.size) {
      case 1:
        builder_.AddElement<uint8_t>(field, static_cast<uint8_t>(f.bits), 0);
        break;
      case 2:
        builder_.AddElement<uint16_t>(field, static_cast<uint16_t>(f.bits), 0);
        break;
      case 4:
        builder_.AddElement<uint32_t>(field, static_cast<uint32_t>(f.bits), 0);
        break;
      default:
        builder_.AddElement<uint64_t>(field, f.bits, 0);
        break;
    }
  }
  return builder_.EndTable(start);
}

}  // namespace ptepack::pte::detail
