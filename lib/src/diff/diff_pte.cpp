// diff for .pte programs: each program resolved as the runtime loads it, then compared by content.
#include "diff/diff_pte.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "diff/plan_compare.h"
#include "pte/merge_internal.h"
#include "ptepack/base/error.h"
#include "hash/parallel_hash.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::detail {
namespace {

// Bytes a program computes with, and their digest when a manifest records it.
struct Bytes {
  ByteRange range;
  std::optional<Digest> known;
};

// One program with every byte it computes with located: stored tensors,
// delegate blobs and the named data the runtime serves it (data files first).
struct Resolved {
  const pte::Program* program = nullptr;
  std::string file;                                          // its file name
  std::vector<std::optional<Bytes>> tensors;                 // parallel to program->tensors
  std::map<std::pair<uint32_t, uint32_t>, Bytes> delegates;  // (plan, index in plan)
  std::map<std::string, Bytes> named;
  bool named_in_program = false;  // some named data is served from the program itself
};

std::string display_of(const Artifact& artifact, const ProgramFile& pf) {
  return artifact.kind == ArtifactKind::pte_directory ? (artifact.root / pf.file).string()
                                                 : artifact.name;
}

// The data a program of the artifact is served: a program of a directory loads
// the shards its manifest entry lists, no others (the artifact's programs are
// the manifest's, in its order); else every data file given.
class ProgramData {
 public:
  ProgramData(const Artifact& artifact, size_t index)
      : artifact_(artifact),
        entry_(artifact.manifest ? &artifact.manifest->programs.at(index) : nullptr) {
    if (entry_ != nullptr) shards_.insert(entry_->shards.begin(), entry_->shards.end());
  }

  [[nodiscard]] const ManifestProgramEntry* entry() const { return entry_; }

  // The tensor of `key` in the program's data files, or null.
  [[nodiscard]] const TensorData* find(const std::string& key) const {
    auto it = artifact_.data.find(key);
    if (it == artifact_.data.end()) return nullptr;
    if (entry_ != nullptr) {
      auto t = artifact_.manifest->tensors.find(key);
      if (t == artifact_.manifest->tensors.end() || !shards_.count(t->second.shard)) return nullptr;
    }
    return &it->second;
  }

 private:
  const Artifact& artifact_;
  const ManifestProgramEntry* entry_;
  std::set<std::string_view> shards_;
};

// Named data: the program's own, then what its data files serve by name.
void resolve_named(const Artifact& artifact, const ProgramData& data, const std::string& display,
                   const std::set<std::string>& external_keys, Resolved& r) {
  for (const auto& nd : r.program->named_data) {
    r.named[nd.key] = Bytes{nd.bytes, std::nullopt};
    r.named_in_program = true;
  }
  auto serve = [&](const std::string& key, const TensorData& d) {
    r.named[key] = Bytes{d.bytes, d.expected_sha256};  // a data file wins over the program
  };
  if (const auto* entry = data.entry(); entry != nullptr) {
    for (const auto& key : entry->named_data) {
      const TensorData* d = data.find(key);
      if (d == nullptr) {
        fail_input("{}: named data {} is in none of its data files", display, quote(key));
      }
      serve(key, *d);
    }
  } else {
    // Data files given by hand: every key no EXTERNAL tensor takes can be asked for by name.
    for (const auto& [key, d] : artifact.data) {
      if (!external_keys.count(key)) serve(key, d);
    }
  }
}

// Delegate blobs, inline in the flatbuffer or in a segment, numbered within their plan.
void resolve_delegates(Resolved& r) {
  std::map<uint32_t, uint32_t> next_in_plan;
  for (const auto& d : r.program->delegates) {
    r.delegates.emplace(std::make_pair(d.plan, next_in_plan[d.plan]++),
                        Bytes{d.bytes, std::nullopt});
  }
}

// Program `index` of the artifact, as the runtime loads it.
Resolved resolve(const Artifact& artifact, size_t index) {
  const ProgramFile& pf = artifact.pte_programs[index];
  const pte::Program& p = pf.program;
  const std::string display = display_of(artifact, pf);
  const ProgramData data(artifact, index);
  Resolved r;
  r.program = &p;
  r.file = pf.file;
  std::set<std::string> external_keys;
  for (const auto& t : p.tensors) {
    if (t.storage == pte::Storage::none) {
      r.tensors.emplace_back();
      continue;
    }
    if (t.storage != pte::Storage::external) {
      r.tensors.push_back(Bytes{t.bytes, std::nullopt});
      continue;
    }
    const auto where = fmt::format("{}: method {} value {}: EXTERNAL tensor {}", display,
                                   quote(p.plans[t.plan]), t.value, quote(t.fqn));
    const TensorData* d = data.find(t.fqn);
    if (d == nullptr) {
      fail_input("{} is in none of its data files (give them as PATH@DATA,...)", where);
    }
    if (d->opaque || d->dtype != t.dtype || d->shape != t.shape ||
        d->dim_order != normalized_dim_order(t.dim_order)) {
      fail_input("{}: the data file's layout {} [{}] differs from the tensor's {} [{}]", where,
                 d->opaque ? "none" : dtype_name(d->dtype), fmt::join(d->shape, ", "),
                 dtype_name(t.dtype), fmt::join(t.shape, ", "));
    }
    external_keys.insert(t.fqn);
    r.tensors.push_back(Bytes{d->bytes, d->expected_sha256});
  }
  resolve_named(artifact, data, display, external_keys, r);
  resolve_delegates(r);
  return r;
}

void add_ranges(const Resolved& r, RangeDigests& digests) {
  auto add = [&](const Bytes& b) {
    if (!b.known) digests.add(b.range);
  };
  for (const auto& t : r.tensors) {
    if (t) add(*t);
  }
  for (const auto& [at, b] : r.delegates) add(b);
  for (const auto& [key, b] : r.named) add(b);
}

const Digest& digest_of(const Bytes& b, const RangeDigests& digests) {
  return b.known ? *b.known : digests.of(b.range);
}

ProgramView view_of(const Resolved& r, const RangeDigests& digests) {
  ProgramView v;
  v.program = r.program;
  const auto& tensors = r.program->tensors;
  v.tensor_digest.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    v.tensor_at.emplace(std::make_pair(tensors[i].plan, tensors[i].value), i);
    if (r.tensors[i]) v.tensor_digest[i] = digest_of(*r.tensors[i], digests);
  }
  for (const auto& [at, b] : r.delegates) {
    v.delegate_blob.emplace(at, std::make_pair(digest_of(b, digests), b.range.size));
  }
  return v;
}

// Where a program keeps the bytes it computes with, for a note when that alone differs.
std::string storage_text(const Resolved& r) {
  uint64_t inside = 0;
  uint64_t outside = 0;
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    if (!r.tensors[i]) continue;
    (r.program->tensors[i].storage == pte::Storage::external ? outside : inside) +=
        r.tensors[i]->range.size;
  }
  for (const auto& [key, b] : r.named) {
    (b.range.file == r.program->file ? inside : outside) += b.range.size;
  }
  return fmt::format("{} B in the program, {} B in data files", grouped(inside), grouped(outside));
}

void compare_named(const Resolved& a, const Resolved& b, const RangeDigests& digests,
                   Reporter& report) {
  for (const auto& [key, x] : a.named) {
    auto it = b.named.find(key);
    if (it == b.named.end()) {
      report.add(DifferenceKind::named_data,
                 fmt::format("named data {} removed ({} B)", quote(key), grouped(x.range.size)));
    } else if (digest_of(x, digests) != digest_of(it->second, digests)) {
      report.add(DifferenceKind::named_data,
                 fmt::format("named data {}: bytes changed ({} B)", quote(key),
                             grouped(it->second.range.size)));
    }
  }
  for (const auto& [key, y] : b.named) {
    if (!a.named.count(key)) {
      report.add(DifferenceKind::named_data,
                 fmt::format("named data {} added ({} B)", quote(key), grouped(y.range.size)));
    }
  }
}

void compare_pair(const Resolved& ra, const Resolved& rb, const RangeDigests& digests,
                  ArtifactDiff& out) {
  const pte::Program& a = *ra.program;
  const pte::Program& b = *rb.program;
  const std::string& name = rb.file;
  Reporter whole(out, name, "");
  auto note = [&](const std::string& text) {
    out.notes.push_back(fmt::format("{}: {}", name, text));
  };
  if (!a.not_rewritable.empty() || !b.not_rewritable.empty()) {
    if (a.flatbuffer != b.flatbuffer) {
      const auto& reasons = a.not_rewritable.empty() ? b.not_rewritable : a.not_rewritable;
      whole.add(DifferenceKind::program,
                fmt::format("cannot be compared field by field ({}) and the programs' "
                            "bytes differ",
                            fmt::join(reasons, "; ")));
    }
  }
  if (a.root()->version() != b.root()->version())
    note(fmt::format("program version {} -> {}", a.root()->version(), b.root()->version()));
  const ProgramView va = view_of(ra, digests);
  const ProgramView vb = view_of(rb, digests);
  std::map<std::string_view, uint32_t> in_a;
  std::map<std::string_view, uint32_t> in_b;
  for (uint32_t i = 0; i < a.plans.size(); ++i) in_a.emplace(a.plans[i], i);
  for (uint32_t j = 0; j < b.plans.size(); ++j) in_b.emplace(b.plans[j], j);
  std::vector<std::string_view> common_a;
  for (uint32_t i = 0; i < a.plans.size(); ++i) {
    auto it = in_b.find(a.plans[i]);
    if (it == in_b.end()) {
      out.methods.push_back({ra.file, a.plans[i], Change::removed});  // named by its own side
      continue;
    }
    common_a.push_back(a.plans[i]);
    Reporter method(out, name, a.plans[i]);
    compare_plans(va, i, vb, it->second, method);
    if (method.any()) out.methods.push_back({name, a.plans[i], Change::changed});
  }
  std::vector<std::string_view> common_b;
  for (const auto& plan : b.plans) {
    if (!in_a.count(plan)) {
      out.methods.push_back({name, plan, Change::added});
    } else {
      common_b.push_back(plan);
    }
  }
  if (common_a != common_b) {
    note(fmt::format("method order [{}] -> [{}]", fmt::join(common_a, ", "),
                     fmt::join(common_b, ", ")));
  }
  compare_named(ra, rb, digests, whole);
  const auto sa = storage_text(ra);
  const auto sb = storage_text(rb);
  if (sa != sb) note(fmt::format("where bytes live: {} -> {}", sa, sb));
}

// The one program of an artifact that has method `name`, and the plan's index.
std::pair<size_t, uint32_t> find_method(const Artifact& artifact, const std::string& name) {
  std::vector<std::pair<size_t, uint32_t>> found;
  std::vector<std::string> all;
  for (size_t i = 0; i < artifact.pte_programs.size(); ++i) {
    const auto& plans = artifact.pte_programs[i].program.plans;
    for (uint32_t k = 0; k < plans.size(); ++k) {
      if (plans[k] == name) found.emplace_back(i, k);
      all.push_back(plans[k]);
    }
  }
  if (found.size() == 1) return found.front();
  if (found.empty()) {
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    fail(ErrorCode::usage, "{}: no method {}; there are: {}", artifact.name, quote(name),
         fmt::join(all, ", "));
  }
  std::vector<std::string> files;
  for (const auto& [i, k] : found) files.push_back(artifact.pte_programs[i].file);
  fail(ErrorCode::usage, "{}: method {} is in {} programs ({}): compare those programs instead",
       artifact.name, quote(name), found.size(), fmt::join(files, ", "));
}

}  // namespace

void diff_method(const Artifact& a, const Artifact& b, const MethodPair& method, unsigned jobs,
                 ArtifactDiff& out) {
  const auto [i, pa] = find_method(a, method.a);
  const auto [j, pb] = find_method(b, method.b);
  out.programs.push_back({a.pte_programs[i].file, b.pte_programs[j].file});
  const Resolved ra = resolve(a, i);
  const Resolved rb = resolve(b, j);
  RangeDigests digests;
  add_ranges(ra, digests);
  add_ranges(rb, digests);
  digests.compute(jobs, nullptr);
  const std::string& name = rb.file;
  Reporter report(out, name, method.b);
  report.shared_state_as_notes = true;
  compare_plans(view_of(ra, digests), pa, view_of(rb, digests), pb, report);
  // Named data: the keys either side's delegates of this method name.
  std::set<std::string> keys;
  for (const auto* r : {&ra, &rb}) {
    for (const auto& [key, bytes] : r->named) keys.insert(key);
  }
  auto named = pte::detail::keys_named_by_plan(*ra.program, pa, keys);
  named.merge(pte::detail::keys_named_by_plan(*rb.program, pb, keys));
  Resolved sa = ra;
  Resolved sb = rb;
  std::erase_if(sa.named, [&](const auto& entry) { return named.count(entry.first) == 0; });
  std::erase_if(sb.named, [&](const auto& entry) { return named.count(entry.first) == 0; });
  compare_named(sa, sb, digests, report);
  if (report.any()) out.methods.push_back({name, method.b, Change::changed});
  out.notes.push_back(fmt::format("method {} of {} compared with method {} of {}; other methods "
                                  "and their data not compared",
                                  quote(method.a), a.pte_programs[i].file, quote(method.b), name));
}

void diff_programs(const Artifact& a, const Artifact& b, unsigned jobs, ArtifactDiff& out) {
  // Pairs of program indices (npos: none on that side).
  constexpr size_t none = static_cast<size_t>(-1);
  std::vector<std::pair<size_t, size_t>> pairs;
  if (a.pte_programs.size() == 1 && b.pte_programs.size() == 1) {
    pairs.emplace_back(0, 0);
  } else {
    std::map<std::string_view, size_t> in_a;
    std::map<std::string_view, size_t> in_b;
    for (size_t i = 0; i < a.pte_programs.size(); ++i) in_a.emplace(a.pte_programs[i].file, i);
    for (size_t j = 0; j < b.pte_programs.size(); ++j) in_b.emplace(b.pte_programs[j].file, j);
    for (size_t i = 0; i < a.pte_programs.size(); ++i) {
      auto it = in_b.find(a.pte_programs[i].file);
      pairs.emplace_back(i, it == in_b.end() ? none : it->second);
    }
    for (size_t j = 0; j < b.pte_programs.size(); ++j) {
      if (!in_a.count(b.pte_programs[j].file)) pairs.emplace_back(none, j);
    }
  }
  std::vector<std::pair<Resolved, Resolved>> resolved;
  RangeDigests digests;
  for (const auto& [i, j] : pairs) {
    const ProgramFile* p = i == none ? nullptr : &a.pte_programs[i];
    const ProgramFile* q = j == none ? nullptr : &b.pte_programs[j];
    out.programs.push_back({p ? p->file : std::string(), q ? q->file : std::string()});
    if (p == nullptr || q == nullptr) {
      const ProgramFile* only = q ? q : p;
      Reporter whole(out, only->file, "");
      whole.add(DifferenceKind::program, q ? "program added" : "program removed");
      for (const auto& plan : only->program.plans)
        out.methods.push_back({only->file, plan, q ? Change::added : Change::removed});
      continue;
    }
    resolved.emplace_back(resolve(a, i), resolve(b, j));
    add_ranges(resolved.back().first, digests);
    add_ranges(resolved.back().second, digests);
  }
  digests.compute(jobs, nullptr);
  for (const auto& [ra, rb] : resolved) compare_pair(ra, rb, digests, out);
}

}  // namespace ptepack::detail
