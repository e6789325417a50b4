// .ptn writer: ZIP of program.ptg, program.safetensors (owners, sorted) and aliases.json.
#include "../formats/json_writer.h"
#include "pack_internal.h"
#include "ptepack/formats/safetensors.h"
#include "ptepack/formats/zip.h"
#include "ptepack/packing/file_content.h"

namespace ptepack::detail {
namespace {

uint32_t crc_of(std::string_view bytes) {
  return zip::crc32_update(
      0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

}  // namespace

void write_package(const PreparedPack& prepared, AtomicOutput* output, Progress* progress,
                   PackSummary& summary) {
  const auto& tensors = prepared.tensors;
  auto groups = group_tensors(tensors, DedupRule::dtype_shape_bytes);
  summarize_groups(tensors, groups, summary, progress);

  // program.safetensors holds each group's owner, in key order (groups are in owner order).
  std::vector<safetensors::Entry> entries;
  entries.reserve(groups.size());
  for (const auto& g : groups) {
    const auto& owner = tensors[g.members[0]];
    entries.push_back({owner.key, owner.data.dtype, owner.data.shape, owner.data.bytes.size});
  }
  std::string aliases_text;
  if (!summary.aliases.empty()) {
    JsonWriter aliases;  // {"alias": "owner", ...}, ordered by alias
    aliases.begin_object();
    for (const auto& [alias, owner] : summary.aliases) aliases.field(alias, owner);
    aliases.end_object();
    aliases_text = std::move(aliases).finish();
    check_readable_size(fmt::format("{}: aliases.json", summary.output), aliases_text.size(),
                        Limits::max_header_bytes);
  }
  std::vector<std::pair<std::string, uint64_t>> members{
      {"program.ptg", prepared.program_bytes().size()}};
  safetensors::Layout weights;
  if (!entries.empty()) {
    weights = safetensors::plan_file(entries, {});
    members.emplace_back("program.safetensors", weights.file_size);
  }
  if (!aliases_text.empty()) members.emplace_back("aliases.json", aliases_text.size());
  auto archive = zip::plan_archive(members, 64);
  summary.output_bytes = archive.end_offset;
  if (output == nullptr) return;

  std::vector<uint32_t> crcs(archive.entries.size(), 0);
  FileContent content;
  content.size = archive.end_offset;
  for (size_t i = 0; i < archive.entries.size(); ++i) {
    const auto& entry = archive.entries[i];
    if (entry.name == "program.ptg") {
      crcs[i] = crc_of(prepared.program_bytes());
      content.pieces.push_back({entry.header_offset, zip::local_header(entry, crcs[i]), {}});
      content.pieces.push_back({entry.data_offset, {}, {}, prepared.program_bytes()});
    } else if (entry.name == "aliases.json") {
      crcs[i] = crc_of(aliases_text);
      content.pieces.push_back({entry.header_offset, zip::local_header(entry, crcs[i]), {}});
      content.pieces.push_back({entry.data_offset, aliases_text, {}});
    } else {
      // Header written after streaming, once the CRC is known.
      content.pieces.push_back({entry.data_offset, weights.head, {}});
      for (size_t k = 0; k < groups.size(); ++k) {
        const auto& owner = tensors[groups[k].members[0]];
        content.pieces.push_back(
            {entry.data_offset + weights.data_offsets[k], {}, owner.data.bytes});
      }
    }
  }
  // By offset; an empty piece (a tensor of zero elements) before the piece that
  // starts where it does, so every piece starts at or after the previous one's end.
  std::sort(content.pieces.begin(), content.pieces.end(), [](const Piece& a, const Piece& b) {
    return std::pair(a.offset, a.size()) < std::pair(b.offset, b.size());
  });

  OutputFile file = output->file();
  StreamOptions stream;
  size_t weights_index = 0;
  for (size_t i = 0; i < archive.entries.size(); ++i) {
    if (archive.entries[i].name == "program.safetensors") {
      weights_index = i;
      stream.crc = std::make_pair(archive.entries[i].data_offset,
                                  archive.entries[i].data_offset + archive.entries[i].size);
    }
  }
  auto result = write_content(file, content, stream, progress);
  if (stream.crc) {
    crcs[weights_index] = result.crc32;
    const auto& entry = archive.entries[weights_index];
    file.write_at(entry.header_offset, zip::local_header(entry, result.crc32));
  }
  file.write_at(archive.directory_offset, zip::central_directory(archive, crcs));
  file.finish(archive.end_offset);
}

}  // namespace ptepack::detail
