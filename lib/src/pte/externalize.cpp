// .pte front end: keys for constants, named data and data-file keys; rewrite plans per program.
#include "pte/externalize.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "ptepack/base/error.h"

namespace ptepack {
namespace {

using pte::Storage;
using pte::TensorEdit;

bool stored_inside(Storage s) {
  return s == Storage::constant_segment || s == Storage::constant_buffer;
}

// Bytes plus the layout a key carries: equal identities may share one key.
using Identity = std::tuple<Digest, uint64_t, int, Shape, std::vector<uint8_t>, bool>;

Identity identity_of(const TensorData& data, const Digest& digest) {
  return {digest,     data.bytes.size, static_cast<int>(data.dtype),
          data.shape, data.dim_order,  data.opaque};
}

TensorData tensor_data(const pte::TensorInfo& t) {
  TensorData d;
  d.dtype = t.dtype;
  d.shape = t.shape;
  d.bytes = t.bytes;
  d.dim_order = normalized_dim_order(t.dim_order);
  return d;
}

std::string where(const ProgramSource& s, const pte::TensorInfo& t) {
  return fmt::format("{}: method {} value {}", s.name, quote(s.file->program.plans[t.plan]),
                     t.value);
}

// The data of an EXTERNAL tensor, checked against the layout the runtime will demand.
const TensorData& external_data(const ProgramSource& s, const pte::TensorInfo& t) {
  auto it = s.data->find(t.fqn);
  if (it == s.data->end()) {
    fail_input("{}: EXTERNAL tensor {} has no data (give its .ptd as @DATA)", where(s, t),
               quote(t.fqn));
  }
  const TensorData& d = it->second;
  if (d.opaque || d.dtype != t.dtype || d.shape != t.shape ||
      d.dim_order != normalized_dim_order(t.dim_order)) {
    fail_input(
        "{}: EXTERNAL tensor {}: the data file's layout {} [{}] differs from the tensor's {} [{}]",
        where(s, t), quote(t.fqn), d.opaque ? "none" : dtype_name(d.dtype),
        fmt::join(d.shape, ", "), dtype_name(t.dtype), fmt::join(t.shape, ", "));
  }
  return d;
}

// Named-data keys of a program with their bytes, in program order, then the
// other keys of its data files (which delegates may ask for by name). Only
// delegates read named data: a program without one keeps none.
std::vector<std::pair<std::string, TensorData>> named_entries(const ProgramSource& s) {
  std::vector<std::pair<std::string, TensorData>> out;
  const auto& program = s.file->program;
  if (program.delegates.empty()) return out;
  if (s.file->named_keys) {
    for (const auto& key : *s.file->named_keys) {
      auto it = s.data->find(key);
      if (it == s.data->end()) fail_input("{}: named data {} is in no shard", s.name, quote(key));
      out.emplace_back(key, it->second);
    }
  }
  for (const auto& nd : program.named_data) out.emplace_back(nd.key, opaque_tensor(nd.bytes));
  if (s.file->named_keys) return out;
  std::set<std::string> used;
  for (const auto& t : program.tensors) {
    if (t.storage == Storage::external) used.insert(t.fqn);
  }

  for (const auto& [key, d] : *s.data) {
    if (!used.count(key)) out.emplace_back(key, d);
  }
  return out;
}

struct Candidate {
  size_t program;
  size_t tensor;  // index into program.tensors, or npos for named data
  std::string key;
  TensorData data;
  Digest digest{};
  bool minted = false;  // a key ptepack chose (may be qualified on a clash)
  // An EXTERNAL tensor's key: the program names it, but ptepack rewrites the
  // program anyway, so on a clash it is qualified like a minted key.
  bool external = false;
  bool kept = false;  // the key an earlier release gave it (pack --base): never qualified
};

constexpr size_t npos = static_cast<size_t>(-1);

// Minted keys of one program that name different contents get ".v<value>".
void separate_within(std::vector<Candidate>& cands, const ProgramSource& s) {
  std::map<std::string, Identity> first;
  for (auto& c : cands) {
    if (!c.minted) continue;
    auto id = identity_of(c.data, c.digest);
    auto [it, fresh] = first.emplace(c.key, id);
    if (!fresh && it->second != id) {
      c.key += fmt::format(".v{}", s.file->program.tensors[c.tensor].value);
    }
  }
}

// Constants and EXTERNAL tensors an earlier release keyed, with the same
// bytes and layout, take that key again.
void keep_previous(std::vector<Candidate>& cands, const ProgramSource& s,
                   const PreviousKeys& previous) {
  const auto& program = s.file->program;
  for (auto& c : cands) {
    if (c.tensor == npos || !(c.minted || c.external)) continue;
    const auto& t = program.tensors[c.tensor];
    auto it = previous.find({s.file->file, program.plans[t.plan], t.value});
    if (it == previous.end()) continue;
    if (identity_of(c.data, c.digest) != identity_of(it->second.layout, it->second.sha256))
      continue;  // new bytes or another layout: a key by the rules of one pack
    c.key = it->second.key;
    c.kept = true;
  }
}

std::string stem_of(const std::string& file) { return std::filesystem::path(file).stem().string(); }

}  // namespace

void add_program_ranges(const ProgramSource& source, RangeDigests& digests) {
  for (const auto& t : source.file->program.tensors) {
    if (stored_inside(t.storage)) digests.add(t.bytes);
  }
  for (const auto& nd : source.file->program.named_data) digests.add(nd.bytes);
  for (const auto& [key, d] : *source.data) digests.add(d.bytes);
}

namespace {

// Program p's candidates: constants stored inside (under minted keys), EXTERNAL
// tensors and named data; zero-length constants stay in the program.
std::vector<Candidate> program_candidates(const ProgramSource& s, size_t p,
                                          const RangeDigests& digests,
                                          ExternalizedProgram& result) {
  const auto& program = s.file->program;
  result.rewrite.tensors.resize(program.tensors.size());
  std::vector<Candidate> cands;
  for (size_t i = 0; i < program.tensors.size(); ++i) {
    const auto& t = program.tensors[i];
    auto& edit = result.rewrite.tensors[i];
    if (stored_inside(t.storage) && t.nbytes == 0) {
      // Zero-length constants stay: one empty buffer serves them all.
      if (result.rewrite.constants.empty()) result.rewrite.constants.push_back({});
      edit.kind = TensorEdit::Kind::constant;
      edit.buffer = 0;
    } else if (stored_inside(t.storage)) {
      const std::string name = t.fqn.empty() ? fmt::format("constant_{}", t.buffer_index) : t.fqn;
      cands.push_back({p, i, final_key(program.plans[t.plan], name, false), tensor_data(t),
                       digests.of(t.bytes), true});
    } else if (t.storage == Storage::external) {
      const auto& d = external_data(s, t);
      cands.push_back({p, i, t.fqn, d, digests.of(d.bytes), false, true});
    }
  }
  // A key both in the program's named data and in a data file is listed once;
  // its two sources must agree (as for any key given twice).
  std::set<std::string> listed;
  for (auto& [key, d] : named_entries(s)) {
    if (listed.insert(key).second) result.named_keys.push_back(key);
    auto digest = digests.of(d.bytes);
    cands.push_back({p, npos, key, std::move(d), digest, false});
  }
  return cands;
}

// Across programs: a minted or EXTERNAL key naming different contents in two
// programs is qualified with its program's file stem; a named-data key cannot
// be (delegates name it inside their blobs), so that is a conflict.
void qualify_clashes(std::vector<Candidate>& all, const std::vector<ProgramSource>& sources) {
  for (int round = 0; round < 2; ++round) {
    std::map<std::string, std::vector<size_t>> by_key;
    for (size_t k = 0; k < all.size(); ++k) by_key[all[k].key].push_back(k);
    bool changed = false;
    for (const auto& [key, list] : by_key) {
      const auto id = identity_of(all[list[0]].data, all[list[0]].digest);
      size_t other = npos;
      for (size_t k : list) {
        if (identity_of(all[k].data, all[k].digest) != id) other = k;
      }
      if (other == npos) continue;
      bool qualified = false;
      for (size_t k : list) {
        auto& c = all[k];
        if (round == 0 && (c.minted || c.external) && !c.kept) {
          c.key += "@" + stem_of(sources[c.program].file->file);
          qualified = true;
        }
      }
      changed = changed || qualified;
      if (!qualified) {
        const auto& a = all[list[0]];
        const auto& b = all[other];
        const bool fixed = std::any_of(list.begin(), list.end(), [&](size_t k) {
          return !all[k].minted && !all[k].external;
        });
        fail(ErrorCode::conflict, "key {} has different bytes or layouts in {} and {} ({})",
             quote(key), sources[a.program].name, sources[b.program].name,
             fixed ? "named-data keys cannot be renamed: delegates name them inside their blobs"
                   : "a program already carries that qualified key (a packed program under "
                     "another file name?): rename one of the files");
      }
    }
    if (!changed) break;
  }
}

// The final keys: each program's edits, renames and key list, the stored tensors.
void collect_keys(const std::vector<Candidate>& all, const std::vector<ProgramSource>& sources,
                  ExternalizedSet& out) {
  std::map<std::string, std::pair<TensorData, Digest>> stored;
  std::vector<std::set<std::string>> keys(sources.size());
  for (const auto& c : all) {
    stored.emplace(c.key, std::make_pair(c.data, c.digest));
    keys[c.program].insert(c.key);
    if (c.tensor == npos) continue;
    const auto& t = sources[c.program].file->program.tensors[c.tensor];
    // An EXTERNAL tensor keeps its key unless a clash qualified it.
    if (!c.minted && !(c.external && c.key != t.fqn)) continue;
    auto& edit = out.programs[c.program].rewrite.tensors[c.tensor];
    edit.kind = TensorEdit::Kind::external;
    edit.key = c.key;
    const auto& plan = sources[c.program].file->program.plans[t.plan];
    out.programs[c.program].renames.push_back(
        {plan, t.fqn.empty() ? fmt::format("value {}", t.value) : t.fqn, c.key});
  }
  for (size_t p = 0; p < sources.size(); ++p) {
    out.programs[p].keys.assign(keys[p].begin(), keys[p].end());
  }
  for (auto& [key, entry] : stored) {
    out.tensors.push_back({key, std::move(entry.first), entry.second, false});
  }
}

}  // namespace

ExternalizedSet externalize(const std::vector<ProgramSource>& sources,
                            const RangeDigests& digests, const PreviousKeys* previous) {
  ExternalizedSet out;
  out.programs.resize(sources.size());
  std::vector<Candidate> all;
  for (size_t p = 0; p < sources.size(); ++p) {
    auto cands = program_candidates(sources[p], p, digests, out.programs[p]);
    separate_within(cands, sources[p]);
    if (previous != nullptr) keep_previous(cands, sources[p], *previous);
    for (auto& c : cands) all.push_back(std::move(c));
  }
  qualify_clashes(all, sources);
  collect_keys(all, sources, out);
  return out;
}

pte::Rewrite inline_program(const ProgramSource& source, const RangeDigests& digests) {
  const auto& program = source.file->program;
  pte::Rewrite rw;
  rw.tensors.resize(program.tensors.size());
  std::map<std::pair<Digest, uint64_t>, uint32_t> buffers;
  auto buffer_of = [&](const ByteRange& bytes) {
    auto [it, fresh] = buffers.emplace(std::make_pair(digests.of(bytes), bytes.size),
                                       static_cast<uint32_t>(rw.constants.size()));
    if (fresh) rw.constants.push_back(bytes);
    return it->second;
  };
  for (size_t i = 0; i < program.tensors.size(); ++i) {
    const auto& t = program.tensors[i];
    auto& edit = rw.tensors[i];
    if (stored_inside(t.storage)) {
      edit = {TensorEdit::Kind::constant, {}, buffer_of(t.bytes)};
    } else if (t.storage == Storage::external) {
      if (t.planned) {
        fail_input("{}: EXTERNAL tensor {} is loaded into planned memory; it cannot be inlined",
                   where(source, t), quote(t.fqn));
      }
      edit = {TensorEdit::Kind::constant, {}, buffer_of(external_data(source, t).bytes)};
    }
  }
  std::map<std::string, Digest> listed;
  for (auto& [key, d] : named_entries(source)) {
    auto [it, fresh] = listed.emplace(key, digests.of(d.bytes));
    if (fresh) {
      rw.named_data.emplace_back(key, d.bytes);
    } else if (it->second != digests.of(d.bytes)) {
      fail(ErrorCode::conflict, "{}: named data {} differs between the program and its data file",
           source.name, quote(key));
    }
  }
  return rw;
}

size_t unreadable_named_data(const ProgramSource& source) {
  const auto& program = source.file->program;
  if (!program.delegates.empty()) return 0;
  if (source.file->named_keys) return source.file->named_keys->size() + program.named_data.size();
  std::set<std::string> used;
  for (const auto& t : program.tensors) {
    if (t.storage == Storage::external) used.insert(t.fqn);
  }
  size_t count = program.named_data.size();
  for (const auto& [key, d] : *source.data) count += used.count(key) == 0 ? 1U : 0U;
  return count;
}

}  // namespace ptepack
