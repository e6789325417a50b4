// .ptn writer: ZIP of program.ptg, program.safetensors (owners, sorted) and aliases.json.
#include <array>
#include <cstdint>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "json/json_writer.h"
#include "pack/pack_internal.h"
#include "containers/safetensors.h"
#include "containers/zip.h"
#include "core/file_content.h"

namespace ptepack::detail {
namespace {

uint32_t crc_of(std::string_view bytes) {
  return zip::crc32_update(
      0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

// aliases.json: {"alias": "owner", ...}, ordered by alias; empty without aliases.
std::string aliases_json(const PackSummary& summary) {
  if (summary.aliases.empty()) return {};
  JsonWriter aliases;
  aliases.begin_object();
  for (const auto& [alias, owner] : summary.aliases) aliases.field(alias, owner);
  aliases.end_object();
  auto text = std::move(aliases).finish();
  check_readable_size(fmt::format("{}: aliases.json", summary.output), text.size(),
                      Limits::max_header_bytes);
  return text;
}

// The package of `groups` (summarized in `summary`); see write_package.
void write_package_file(const PreparedPack& prepared, const std::vector<StorageGroup>& groups,
                        AtomicOutput* output, Progress* progress, PackSummary& summary,
                        const std::stop_token& stop = {}) {
  const auto& tensors = prepared.tensors;

  // program.safetensors holds each group's owner, in key order (groups are in owner order).
  std::vector<safetensors::Entry> entries;
  entries.reserve(groups.size());
  for (const auto& g : groups) {
    const auto& owner = tensors[g.members[0]];
    entries.push_back({owner.key, owner.data.dtype, owner.data.shape, owner.data.bytes.size});
  }
  const std::string aliases_text = aliases_json(summary);
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
  stream.stop = stop;
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

// A prediction reads three samples of a tensor (start, middle, end), or all
// of it when that is no more.
constexpr uint64_t kSample = 4096;
constexpr uint64_t kSampledBytes = 3 * kSample;

// What a tensor's bytes look like from its samples: equal for equal bytes.
Digest sample_fingerprint(const ByteRange& range) {
  std::array<uint8_t, kSample> buffer{};
  Sha256 hasher;
  auto take = [&](uint64_t at, uint64_t size) {
    auto bytes = std::span<uint8_t>(buffer.data(), static_cast<size_t>(size));
    range.file->read_at(range.offset + at, bytes);
    hasher.update(bytes);
  };
  if (range.size <= kSampledBytes) {
    for (uint64_t at = 0; at < range.size; at += kSample)
      take(at, std::min(kSample, range.size - at));
  } else {
    take(0, kSample);
    take(range.size / 2 - kSample / 2, kSample);
    take(range.size - kSample, kSample);
  }
  return hasher.finish();
}

// Byte ranges of `sizes` whose length no other shares cannot be duplicates;
// nor can the `excluded` ones (state), which never share bytes.
std::vector<bool> may_have_duplicates(const std::vector<uint64_t>& sizes,
                                      const std::vector<bool>& excluded = {}) {
  auto left_out = [&](size_t i) { return i < excluded.size() && excluded[i]; };
  std::unordered_map<uint64_t, uint32_t> per_size;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!left_out(i)) ++per_size[sizes[i]];
  }
  std::vector<bool> candidate(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) candidate[i] = !left_out(i) && per_size[sizes[i]] > 1;
  return candidate;
}

// The digest `range` is predicted to have: its samples' when it may have a
// duplicate; else one of its own, made of where it lies (its length alone
// keeps it apart, and the same range is the same bytes), so predictions made
// at different times never meet by chance. Its first 8 bytes, which dedup
// hashes on, mix all three (ranges of one file must not share a bucket).
Digest predicted_digest(const ByteRange& range, bool candidate) {
  if (candidate) return sample_fingerprint(range);
  auto mix = [](uint64_t x) {  // splitmix64's finaliser
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  const uint64_t file = reinterpret_cast<std::uintptr_t>(range.file.get());
  const uint64_t spread = mix(file ^ mix(range.offset ^ mix(range.size))) | 1;  // never zero
  Digest own{};
  std::memcpy(own.data(), &spread, 8);
  std::memcpy(own.data() + 8, &file, 8);
  std::memcpy(own.data() + 16, &range.offset, 8);
  std::memcpy(own.data() + 24, &range.size, 8);
  return own;
}

// At least `from_bytes` to hash (0: never), of which sampling every possible
// duplicate (up to kSampledBytes each) reads a small part.
bool worth_predicting(const std::vector<uint64_t>& sizes, const std::vector<bool>& candidate,
                      uint64_t from_bytes) {
  uint64_t total = 0;
  uint64_t sampled = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    total += sizes[i];
    if (candidate[i]) sampled += std::min(sizes[i], kSampledBytes);
  }
  return from_bytes != 0 && total >= from_bytes && sampled <= total / 64;
}

std::vector<uint64_t> sizes_of(const std::vector<StoredTensor>& tensors) {
  std::vector<uint64_t> sizes;
  sizes.reserve(tensors.size());
  for (const auto& t : tensors) sizes.push_back(t.data.bytes.size);
  return sizes;
}

std::vector<bool> mutable_flags(const std::vector<StoredTensor>& tensors) {
  std::vector<bool> flags;
  flags.reserve(tensors.size());
  for (const auto& t : tensors) flags.push_back(t.is_mutable);
  return flags;
}

std::vector<uint64_t> sizes_of(const std::vector<ByteRange>& ranges) {
  std::vector<uint64_t> sizes;
  sizes.reserve(ranges.size());
  for (const auto& r : ranges) sizes.push_back(r.size);
  return sizes;
}

}  // namespace

void write_package(const PreparedPack& prepared, AtomicOutput* output, Progress* progress,
                   PackSummary& summary) {
  auto groups = group_tensors(prepared.tensors, prepared.dedup);
  summarize_groups(prepared.tensors, groups, summary, progress);
  write_package_file(prepared, groups, output, progress, summary);
}

bool worth_writing_while_hashing(const std::vector<StoredTensor>& tensors, uint64_t from_bytes) {
  const auto sizes = sizes_of(tensors);
  return worth_predicting(sizes, may_have_duplicates(sizes, mutable_flags(tensors)), from_bytes);
}

bool worth_writing_while_hashing(const RangeDigests& digests, uint64_t from_bytes) {
  const auto sizes = sizes_of(digests.pending());
  return worth_predicting(sizes, may_have_duplicates(sizes), from_bytes);
}

std::unique_ptr<AtomicOutput> output_before_hashing(const PackContext& context,
                                                    AtomicOutput::Kind kind) {
  const auto& options = context.options;
  std::error_code ec;
  auto target = options.output;  // `-o out/` names `out`, as AtomicOutput reads it
  if (target.filename().empty()) target = target.parent_path();
  const auto parent = target.parent_path();
  if (!(parent.empty() || std::filesystem::is_directory(parent, ec))) return nullptr;
  try {
    return std::make_unique<AtomicOutput>(options.output, kind);
  } catch (const Error&) {
    return nullptr;
  }
}

bool planned_on_prediction(const std::function<void()>& plan) {
  try {
    plan();
    return true;
  } catch (const Error&) {
    return false;
  }
}

void write_beside_hashing(const std::function<void(const std::stop_token&)>& write,
                          const std::function<void()>& hash, std::exception_ptr& write_error) {
  // The writer reads keys, layouts and bytes; hash() writes only digests.
  std::jthread writer([&](const std::stop_token& stop) {
    try {
      write(stop);
    } catch (...) {
      write_error = std::current_exception();
    }
  });
  try {
    hash();
  } catch (...) {
    writer.request_stop();  // its output is abandoned: it stops at its next chunk
    writer.join();
    throw;
  }
  writer.join();
}

void predict_digests(RangeDigests& digests) {
  const auto ranges = digests.pending();
  const auto candidate = may_have_duplicates(sizes_of(ranges));
  for (size_t i = 0; i < ranges.size(); ++i)
    digests.set(ranges[i], predicted_digest(ranges[i], candidate[i]));
}

void predict_digests(std::vector<StoredTensor>& tensors) {
  const auto candidate = may_have_duplicates(sizes_of(tensors), mutable_flags(tensors));
  for (size_t i = 0; i < tensors.size(); ++i)
    tensors[i].sha256 = predicted_digest(tensors[i].data.bytes, candidate[i]);
}

bool same_groups(const std::vector<StorageGroup>& a, const std::vector<StorageGroup>& b) {
  if (a.size() != b.size()) return false;
  for (size_t g = 0; g < a.size(); ++g) {
    if (a[g].members != b[g].members) return false;
  }
  return true;
}

std::optional<Speculation<PackagePlan>> write_package_while_hashing(
    PreparedPack& prepared, AtomicOutput& output, Progress* progress, const PackSummary& summary,
    const std::function<void()>& hash) {
  predict_digests(prepared.tensors);
  return speculate<PackagePlan>(
      [&] {
        PackagePlan plan;
        plan.groups = group_tensors(prepared.tensors, prepared.dedup);
        plan.summary.output = summary.output;
        summarize_groups(prepared.tensors, plan.groups, plan.summary, progress);
        return plan;
      },
      [&](PackagePlan& plan, const std::stop_token& stop) {
        write_package_file(prepared, plan.groups, &output, progress, plan.summary, stop);
      },
      hash);
}

bool confirm_package(const PreparedPack& prepared, const Speculation<PackagePlan>& speculation,
                     Progress* progress, PackSummary& summary) {
  auto groups = group_tensors(prepared.tensors, prepared.dedup);
  if (!speculation_holds(speculation, same_groups(groups, speculation.plan.groups))) return false;
  summarize_groups(prepared.tensors, groups, summary, progress);
  summary.output_bytes = speculation.plan.summary.output_bytes;
  summary.written_while_hashing = true;
  return true;
}

}  // namespace ptepack::detail
