// Schema-driven walk and copy of a verified .pte flatbuffer (FlatBuffers mini-reflection).
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ptepack::pte::detail {

// Lists what a rewrite through the generated schema would lose: fields beyond
// the schema (a vtable with non-zero slots past the known fields), union tags
// and enum values the schema does not define. At most `limit` entries.
void find_unknown(const flatbuffers::Table* root, const flatbuffers::TypeTable* type,
                  std::vector<std::string>& out, size_t limit = 8);

// The first non-empty vector of 8-byte scalars whose data is not 8-byte aligned (the
// FlatBuffers 2.0 verifier checks 4; reading such a vector is undefined
// behaviour), as a field path; empty when there is none.
[[nodiscard]] std::string find_misaligned(const flatbuffers::Table* root,
                                          const flatbuffers::TypeTable* type);

// One field of a table being built: raw little-endian scalar bits or an offset
// to an object already built.
struct Field {
  uint16_t slot = 0;  // field index; vtable offset 4 + 2 * slot
  bool is_offset = false;
  uint8_t size = 0;  // scalar bytes (1, 2, 4 or 8)
  uint64_t bits = 0;
  flatbuffers::uoffset_t offset = 0;
};

// Sets (or adds) a field in a field list.
void set_scalar(std::vector<Field>& fields, uint16_t slot, uint8_t size, uint64_t bits);
void set_offset(std::vector<Field>& fields, uint16_t slot, flatbuffers::uoffset_t offset);
void remove_field(std::vector<Field>& fields, uint16_t slot);

// Copies tables field for field, keeping the presence of every field exactly
// (scalars equal to their default included), in a fixed order so equal input
// gives equal bytes. `edit` sees every table's collected fields before the table
// is written and may change them (building new objects through builder()).
class Copier {
 public:
  using Edit = std::function<void(const flatbuffers::Table* source,
                                  const flatbuffers::TypeTable* type, std::vector<Field>& fields)>;

  // Fields `skip` names are not copied: they reach `edit` as a placeholder
  // offset of 0 (presence only), which edit must replace or remove.
  using Skip = std::function<bool(const flatbuffers::Table* source,
                                  const flatbuffers::TypeTable* type, uint16_t slot)>;

  Copier(flatbuffers::FlatBufferBuilder& builder, Edit edit, Skip skip, uint64_t inline_alignment);

  flatbuffers::uoffset_t copy(const flatbuffers::Table* table, const flatbuffers::TypeTable* type);
  // A byte vector, aligned to `alignment` (0: natural).
  flatbuffers::uoffset_t bytes(const uint8_t* data, size_t size, size_t alignment = 0);
  flatbuffers::uoffset_t string(const std::string& text);
  // Writes a table from fields (slot order is irrelevant: output order is fixed).
  flatbuffers::uoffset_t table(std::vector<Field> fields);
  [[nodiscard]] flatbuffers::FlatBufferBuilder& builder() { return builder_; }

 private:
  void room(uint64_t bytes);
  flatbuffers::uoffset_t vector(const flatbuffers::Table* table, const flatbuffers::TypeTable* type,
                                size_t index);

  flatbuffers::FlatBufferBuilder& builder_;
  // A table referenced from several places is copied once and shared again,
  // so output size follows input size (a DAG cannot blow up into a tree).
  std::map<std::pair<const void*, const void*>, flatbuffers::uoffset_t> copies_;
  Edit edit_;
  Skip skip_;
  uint64_t inline_alignment_;
};

}  // namespace ptepack::pte::detail
