// Merging .pte programs: data stored once, every index remapped, one program of pieces.
#include "pte/merge.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>

#include "pte/pte_copy.h"
#include "pte/merge_internal.h"
#include "pte/pte_frame.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::pte {
namespace {

namespace fb = flatbuffers;
namespace et = executorch_flatbuffer;
using detail::Copier;
using detail::Field;
using detail::has_instructions;
using detail::returned_values;

}  // namespace

void add_merge_ranges(const Program& p, const TensorTable& data, RangeDigests& digests) {
  for (const auto& t : p.tensors) {
    if (t.storage != Storage::none && t.storage != Storage::external) digests.add(t.bytes);
  }
  for (const auto& nd : p.named_data) digests.add(nd.bytes);
  for (const Delegate& d : p.delegates) {
    if (d.size > 0 || !d.inline_data) digests.add(d.bytes);
  }
  for (const auto& [key, t] : data) digests.add(t.bytes);
}

namespace {

class Merger {
 public:
  Merger(const std::vector<MergeInput>& inputs, const RangeDigests& digests)
      : inputs_(inputs), digests_(digests) {
    plan_.remaps.resize(inputs.size());
  }

  Merged run(const std::string& name, const MergeOptions& options) {
    check_inputs();
    if (options.constant_alignment != 0) plan_.tensor_alignment = options.constant_alignment;
    choose_plans();
    for (size_t i = 0; i < inputs_.size(); ++i) collect(i);
    place_segments();
    if (options.share_state) {
      out_.notes.push_back(detail::plan_shared_state(plan_, inputs_, digests_));
    } else {
      auto notes = detail::shareable_state(plan_, inputs_);
      out_.notes.insert(out_.notes.end(), notes.begin(), notes.end());
    }
    out_.file = InputFile::compose(name, detail::write_merge(plan_, inputs_));
    return std::move(out_);
  }

 private:
  void check_inputs() {
    const MergeInput* first = nullptr;
    for (const auto& in : inputs_) {
      const Program& p = *in.program;
      if (!p.not_rewritable.empty()) {
        fail_input("{}: cannot merge: {} (ptepack would lose it)", in.name,
                   p.not_rewritable.front());
      }
      const auto* mutables = p.root()->mutable_data_segments();
      if (mutables != nullptr && mutables->size() > 1) {
        fail_input("{}: cannot merge: {} mutable_data_segments (the runtime reads only the first)",
                   in.name, mutables->size());
      }
      const uint32_t version = p.root()->version();
      if (first == nullptr) {
        first = &in;
        if (reinterpret_cast<const fb::Table*>(p.root())->CheckField(4 + 2 * detail::kVersion))
          plan_.version = version;
      } else if (version != first->program->root()->version()) {
        fail_input("{}: Program.version {} differs from {} in {}: programs of different "
                   "ExecuTorch versions cannot be merged",
                   in.name, version, first->program->root()->version(), first->name);
      }
      plan_.inline_field = plan_.inline_field || p.root()->backend_delegate_data() != nullptr;
      plan_.mutable_field = plan_.mutable_field || mutables != nullptr;
      plan_.inline_alignment = std::max(plan_.inline_alignment, p.inline_alignment);
      plan_.tensor_alignment = std::max(plan_.tensor_alignment, p.tensor_alignment);
      plan_.segment_alignment = std::max(
          plan_.segment_alignment, std::min(p.segment_alignment, detail::kMaxSegmentAlignment));
    }
  }

  // Method names: each once, but a constant-only method returning the same
  // values in every input that has it is kept once.
  void choose_plans() {
    std::map<std::string, std::pair<size_t, uint32_t>> seen;  // name -> input, plan
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const auto& in = inputs_[i];
      for (size_t k = 0; k < in.plans.size(); ++k) {
        const std::string& name = in.names[k];
        const uint32_t plan = in.plans[k];
        auto [it, fresh] = seen.emplace(name, std::make_pair(i, plan));
        if (fresh) {
          out_.methods.push_back({name, i, in.program->plans[plan]});
          plan_.plans.emplace_back(i, plan);
          continue;
        }
        const auto& [j, other] = it->second;
        const auto& first = inputs_[j];
        const bool constant_only =
            !has_instructions(*first.program, other) && !has_instructions(*in.program, plan);
        const auto values = constant_only ? returned_values(*in.program, plan, digests_)
                                          : std::nullopt;
        if (values && values == returned_values(*first.program, other, digests_)) {
          out_.notes.push_back(fmt::format(
              "method {} returns the same values in {} and {}: kept once", quote(name),
              first.name, in.name));
          continue;
        }
        if (constant_only) {
          fail(ErrorCode::conflict,
               "{}: method {} returns other values than in {}: constant methods are kept once "
               "only when they agree",
               in.name, quote(name), first.name);
        }
        fail(ErrorCode::conflict,
             "{}: method {} is also in {}: give one another name with NEWNAME=PATH (a "
             "single-method program), or keep only some methods of a multi-method one first "
             "(pack PATH --method M -o ONE.pte)",
             in.name, quote(name), first.name);
      }
    }
  }

  bool chosen(size_t i, uint32_t plan) const {
    const auto& plans = plan_.plans;
    return std::find(plans.begin(), plans.end(), std::make_pair(i, plan)) != plans.end();
  }

  // The merged segment holding a range's bytes: one per distinct content.
  uint32_t shared_segment(const ByteRange& range, bool& shared) {
    const auto digest = digests_.of(range);
    auto [it, fresh] = segment_by_digest_.emplace(std::make_pair(digest, range.size),
                                                  static_cast<uint32_t>(plan_.segments.size()));
    shared = !fresh;
    if (fresh) {
      detail::MergeSegment s;
      s.size = range.size;
      if (range.size > 0) s.pieces.push_back({0, range});
      plan_.segments.push_back(std::move(s));
    }
    return it->second;
  }

  // Everything input `i`'s chosen plans use, with its merged index or name.
  void collect(size_t i) {
    const MergeInput& in = inputs_[i];
    const Program& p = *in.program;
    detail::MergeRemap& r = plan_.remaps[i];
    const auto* plans = p.root()->execution_plan();
    for (size_t k = 0; k < in.plans.size(); ++k) {
      if (!chosen(i, in.plans[k])) continue;
      r.plan_name.emplace(plans->Get(in.plans[k]), in.names[k]);
      r.plan_names.emplace(in.plans[k], in.names[k]);
    }
    collect_tensors(i);
    collect_delegates(i);
    collect_named_data(i);
  }

  void collect_tensors(size_t i) {
    const MergeInput& in = inputs_[i];
    const Program& p = *in.program;
    detail::MergeRemap& r = plan_.remaps[i];
    // A buffer may serve several values of several shapes: its bytes are the longest.
    std::map<std::pair<Storage, uint32_t>, ByteRange> buffers;
    for (const TensorInfo& t : p.tensors) {
      if (!chosen(i, t.plan)) continue;
      r.tensor.emplace(t.table, &t);
      if (t.table->extra_tensor_info() != nullptr) r.extra.emplace(t.table->extra_tensor_info(), &t);
      if (t.storage == Storage::external) {
        external(i, t);
        continue;
      }
      if (t.storage == Storage::none) continue;
      const Storage kind =
          t.storage == Storage::mutable_state ? Storage::mutable_state : Storage::constant_segment;
      auto [it, fresh] = buffers.emplace(std::make_pair(kind, t.buffer_index), t.bytes);
      if (!fresh && t.bytes.size > it->second.size) it->second = t.bytes;
    }
    for (const auto& [id, range] : buffers) {
      auto& list = id.first == Storage::mutable_state ? state_ : constants_;
      auto& map = id.first == Storage::mutable_state ? r.state : r.constant;
      map.emplace(id.second, static_cast<uint32_t>(list.size() + 1));  // offsets[0] is reserved
      list.push_back(range);
    }
  }

  // An EXTERNAL key keeps its name; another input's with other data gets `@<stem>`.
  void external(size_t i, const TensorInfo& t) {
    const MergeInput& in = inputs_[i];
    detail::MergeRemap& r = plan_.remaps[i];
    if (r.fqn.count(t.fqn) != 0) return;
    auto d = in.data->find(t.fqn);
    if (d == in.data->end()) {
      fail_input("{}: method {} value {}: EXTERNAL tensor {} has no data (give its .ptd as @DATA)",
                 in.name, quote(in.program->plans[t.plan]), t.value, quote(t.fqn));
    }
    std::string key = t.fqn;
    for (unsigned attempt = 0;; ++attempt) {
      auto [it, fresh] = out_.data.emplace(key, d->second);
      if (fresh || same_data(it->second, d->second)) break;
      if (t.planned) {
        fail(ErrorCode::conflict,
             "{}: trainable EXTERNAL tensor {} has other data than in another input (a trainable "
             "key is never renamed)",
             in.name, quote(t.fqn));
      }
      key = attempt == 0 ? t.fqn + "@" + in.stem : fmt::format("{}@{}.{}", t.fqn, in.stem, i);
    }
    if (key != t.fqn) {
      out_.notes.push_back(fmt::format("{}: EXTERNAL key {} has other data than in an earlier "
                                       "input: {} in the merged program",
                                       in.name, quote(t.fqn), quote(key)));
    }
    r.fqn.emplace(t.fqn, key);
  }

  bool same_data(const TensorData& a, const TensorData& b) const {
    return a.opaque == b.opaque && a.dtype == b.dtype && a.shape == b.shape &&
           a.dim_order == b.dim_order && a.bytes.size == b.bytes.size &&
           digests_.of(a.bytes) == digests_.of(b.bytes);
  }

  void collect_delegates(size_t i) {
    const Program& p = *inputs_[i].program;
    detail::MergeRemap& r = plan_.remaps[i];
    for (const Delegate& d : p.delegates) {
      if (!chosen(i, d.plan)) continue;
      if (d.inline_data) {
        const ByteRange& range = d.bytes;
        auto key = std::make_pair(d.size == 0 ? Digest{} : digests_.of(range), d.size);
        auto [it, fresh] = inline_by_digest_.emplace(key, static_cast<uint32_t>(plan_.inline_data.size()));
        if (fresh) plan_.inline_data.push_back(range);
        if (!fresh && r.inline_data.count(d.index) == 0) ++out_.delegate_blobs_shared;
        r.inline_data.emplace(d.index, it->second);
        continue;
      }
      if (r.segment.emplace(d.index, 0).second) pending_segments_.emplace_back(i, d.index);
    }
  }

  // Named data: every key once; one key with other bytes in two inputs is a conflict.
  // With only some methods kept, a key that only dropped methods' delegates name
  // inside their blobs goes with them.
  void collect_named_data(size_t i) {
    const MergeInput& in = inputs_[i];
    const Program& p = *in.program;
    if (in.plans.empty()) return;
    std::set<std::string> dropped;
    if (in.plans.size() < p.plans.size()) dropped = keys_of_dropped_methods(i);
    for (const NamedEntry& e : p.named_data) {
      if (dropped.count(e.key) == 0) add_named(i, e.key, e.bytes, false);
    }
    if (in.data == nullptr) return;
    std::set<std::string> external;
    for (const TensorInfo& t : p.tensors) {
      if (t.storage == Storage::external) external.insert(t.fqn);
    }
    auto from_files = [&](const std::string& key) {
      if (dropped.count(key) != 0) return;
      auto it = in.data->find(key);
      if (it == in.data->end()) fail_input("{}: named data {} is in no data file", in.name, quote(key));
      add_named(i, key, it->second.bytes, true, &it->second);
    };
    if (in.named_keys != nullptr && *in.named_keys) {
      for (const auto& key : **in.named_keys) from_files(key);
    } else {
      for (const auto& [key, t] : *in.data) {
        if (external.count(key) == 0) from_files(key);
      }
    }
  }

  // Named-data keys that delegates of dropped methods name in their blobs and
  // no delegate of a kept method does.
  std::set<std::string> keys_of_dropped_methods(size_t i) const {
    const Program& p = *inputs_[i].program;
    std::set<std::string> keys;
    for (const NamedEntry& e : p.named_data) keys.insert(e.key);
    if (const auto* data = inputs_[i].data) {
      for (const auto& [key, t] : *data) keys.insert(key);
    }
    std::set<std::string> kept;
    std::set<std::string> dropped;
    for (uint32_t plan = 0; plan < p.plans.size(); ++plan) {
      auto named = detail::keys_named_by_plan(p, plan, keys);
      (chosen(i, plan) ? kept : dropped).merge(named);
    }
    std::erase_if(dropped, [&](const std::string& key) { return kept.count(key) != 0; });
    return dropped;
  }

  void add_named(size_t i, const std::string& key, const ByteRange& range, bool from_files,
                 const TensorData* data = nullptr) {
    const MergeInput& in = inputs_[i];
    const Digest digest = digests_.of(range);
    auto [it, fresh] = named_.emplace(key, NamedSource{i, range, digest, from_files});
    if (!fresh) {
      if (it->second.digest != digest || it->second.range.size != range.size) {
        fail(ErrorCode::conflict,
             "{}: named data {} has other bytes than in {} (delegates name their data inside "
             "their blobs: the key cannot change)",
             in.name, quote(key), inputs_[it->second.input].name);
      }
      if (it->second.input != i) ++out_.named_data_shared;
      return;
    }
    named_order_.push_back(key);
    if (from_files) out_.data.emplace(key, *data);
  }

  void place_segments();

  struct NamedSource {
    size_t input;
    ByteRange range;
    Digest digest;
    bool from_files;
  };

  const std::vector<MergeInput>& inputs_;
  const RangeDigests& digests_;
  detail::MergePlan plan_;
  Merged out_;
  std::vector<ByteRange> constants_;  // merged constant buffers, data_buffer_idx - 1
  std::vector<ByteRange> state_;      // merged mutable state buffers
  std::map<std::pair<Digest, uint64_t>, uint32_t> inline_by_digest_;
  std::vector<std::pair<size_t, uint32_t>> pending_segments_;  // (input, old segment)
  std::map<std::pair<Digest, uint64_t>, uint32_t> segment_by_digest_;
  std::map<std::string, NamedSource> named_;
  std::vector<std::string> named_order_;  // program named_data keys and data-file keys, in order
};

detail::MergeSegment packed_segment(const std::vector<ByteRange>& buffers, uint64_t alignment,
                                    std::vector<uint64_t>& offsets) {
  detail::MergeSegment s;
  offsets.assign(1, 0);
  for (const ByteRange& b : buffers) {
    const uint64_t at = s.size == 0 ? 0 : detail::aligned(s.size, alignment);
    offsets.push_back(at);
    if (b.size > 0) s.pieces.push_back({at, b});
    s.size = at + b.size;
  }
  return s;
}

// Segments in ExecuTorch's order: constants, mutable state, delegate blobs, named data.
void Merger::place_segments() {
  auto& segments = plan_.segments;
  segments.push_back(packed_segment(constants_, plan_.tensor_alignment, plan_.constant_offsets));
  if (!state_.empty()) {
    plan_.state_segment = static_cast<uint32_t>(segments.size());
    segments.push_back(packed_segment(state_, plan_.tensor_alignment, plan_.state_offsets));
  }
  for (const auto& [i, old] : pending_segments_) {
    const Program& p = *inputs_[i].program;
    const Segment& s = p.segments[old];
    bool shared = false;
    plan_.remaps[i].segment[old] = shared_segment(ByteRange{p.file, s.offset, s.size}, shared);
    if (shared) ++out_.delegate_blobs_shared;
  }
  // Named data the inputs stored in themselves get segments; keys of their data
  // files stay in the data files (`out_.data`).
  for (const auto& key : named_order_) {
    const NamedSource& n = named_.at(key);
    if (n.from_files) continue;
    bool shared = false;
    plan_.named_data.emplace_back(key, shared_segment(n.range, shared));
  }
  for (auto& s : segments) {
    s.offset = s.size == 0 ? 0 : detail::aligned(plan_.data_size, plan_.segment_alignment);
    if (s.size > 0) plan_.data_size = s.offset + s.size;
  }
}

}  // namespace

Merged merge(const std::vector<MergeInput>& inputs, const RangeDigests& digests,
             const std::string& name, const MergeOptions& options) {
  return Merger(inputs, digests).run(name, options);
}

}  // namespace ptepack::pte
