// The shard options a manifest records, one row each (docs/manifest.md, "Shard options").
#pragma once

#include <array>
#include <span>
#include <string_view>

#include "json/json_document.h"
#include "json/json_writer.h"
#include "ptepack/containers/manifest.h"

namespace ptepack {

class ManifestReader;

// A shard option as a manifest records it: its field, the `pack` flag that sets it and the
// words that flag takes (none: a size, a number or a name), how the manifest reader reads
// and checks the field, and how the writer writes it. The manifest reader walks the rows in
// this order (a field's check may need one before it: alignment the shard format), the
// writer writes each in its place among the other fields, and pack's option table
// (shard_options()) takes each option's flag and words from here.
struct ShardField {
  std::string_view field;
  std::string_view flag;
  std::array<std::string_view, 2> words;
  void (*read)(ManifestReader& reader, const JsonValue& root, Manifest& manifest);
  void (*write)(JsonWriter& writer, const Manifest& manifest);
};

[[nodiscard]] std::span<const ShardField> shard_fields();

}  // namespace ptepack
