// ExecuTorch program (.pte) reader: header, verified flatbuffer, segments and every index checked.
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <set>

#include "pte_copy.h"
#include "ptepack/base/byte_reader.h"
#include "ptepack/base/checked.h"
#include "ptepack/base/error.h"
#include "ptepack/base/format_util.h"
#include "ptepack/formats/pte.h"
#include "ptepack/schema/pte_program_generated.h"

namespace ptepack::pte {
namespace {

namespace fb = flatbuffers;
namespace et = executorch_flatbuffer;

constexpr std::string_view kIdentifier = "ET12";
constexpr std::string_view kHeaderMagic = "eh00";
constexpr uint64_t kMinHeaderLength = 24;
constexpr uint64_t kMaxAlignment = 4096;

uint64_t low_bit(uint64_t v) { return v == 0 ? uint64_t{1} << 63 : v & (~v + 1); }

Header read_header(const InputFile& file) {
  const std::string& name = file.name();
  if (file.size() < 8) fail_input("{}: {} bytes is too small for a .pte program", name, file.size());
  std::array<uint8_t, 8 + header_length> raw{};
  file.read_at(0, std::span<uint8_t>(raw.data(), std::min<size_t>(raw.size(), file.size())));
  auto text = [&](size_t at) {
    return std::string_view(reinterpret_cast<const char*>(&raw[at]), 4);
  };
  if (text(4) != kIdentifier) {
    fail_input("{}: not an ExecuTorch program: identifier {} at offset 4 (expected 'ET12')", name,
               quote(text(4)));
  }
  Header h;
  h.program_size = file.size();
  if (file.size() < 8 + kMinHeaderLength || text(8) != kHeaderMagic) return h;
  h.present = true;
  h.length = load_u32(&raw[12]);
  h.program_size = load_u64(&raw[16]);
  h.segment_base = load_u64(&raw[24]);
  if (h.length < kMinHeaderLength) {
    fail_input("{}: eh00 header length {} is less than {}", name, h.length, kMinHeaderLength);
  }
  if (h.length >= header_length) {
    if (file.size() < 8 + header_length) {
      fail_input("{}: eh00 header of length {} is cut off by the end of the file", name, h.length);
    }
    h.segment_data_size = load_u64(&raw[32]);
  }
  if (h.program_size < 8 + h.length || h.program_size > file.size()) {
    fail_input("{}: eh00 program_size {} is outside the file ({} bytes, header ends at {})", name,
               h.program_size, file.size(), 8 + h.length);
  }
  if (h.segment_base != 0) {
    auto end = checked_add(h.segment_base, h.segment_data_size);
    if (h.segment_base < h.program_size || !end || *end > file.size()) {
      fail_input(
          "{}: eh00 segment_base_offset {} + segment_data_size {} is outside [program_size {}, "
          "file size {}]",
          name, h.segment_base, h.segment_data_size, h.program_size, file.size());
    }
  } else if (h.segment_data_size != 0) {
    fail_input("{}: eh00 segment_data_size {} without a segment_base_offset", name,
               h.segment_data_size);
  }
  if (h.program_size > max_flatbuffer_bytes) {
    fail_input("{}: program flatbuffer of {} bytes exceeds the 2 GiB limit", name, h.program_size);
  }
  return h;
}

template <typename T>
uint32_t count(const fb::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// Checks and records everything of one execution plan.
struct PlanReader {
  const std::string& name;
  Program& out;
  const et::Program& root;
  uint32_t plan;
  const et::ExecutionPlan& ep;
  std::string where;

  void index(int64_t value, uint32_t size, std::string_view field, bool allow_none = false) const {
    if (allow_none && value == -1) return;
    if (value < 0 || value >= size) {
      fail_input("{}: {}.{}: index {} is out of range ({} entries)", name, where, field, value,
                 size);
    }
  }
  void indices(const fb::Vector<int32_t>* v, uint32_t size, std::string_view field,
               bool allow_none = false) const {
    for (uint32_t k = 0; k < count(v); ++k) index(v->Get(k), size, field, allow_none);
  }

  void run() {
    const uint32_t values = count(ep.values());
    indices(ep.inputs(), values, "inputs");
    indices(ep.outputs(), values, "outputs");
    for (uint32_t c = 0; c < count(ep.chains()); ++c) chain(*ep.chains()->Get(c), c, values);
    for (uint32_t v = 0; v < values; ++v) value(*ep.values()->Get(v), v, values);
    for (uint32_t d = 0; d < count(ep.delegates()); ++d) delegate(*ep.delegates()->Get(d), d);
    for (uint32_t o = 0; o < count(ep.operators()); ++o) {
      if (ep.operators()->Get(o)->name() == nullptr) {
        fail_input("{}: {}.operators[{}] has no name", name, where, o);
      }
    }
  }

  void chain(const et::Chain& chain, uint32_t c, uint32_t values) const {
    const std::string at = fmt::format("chains[{}]", c);
    indices(chain.inputs(), values, at + ".inputs");
    indices(chain.outputs(), values, at + ".outputs");
    const uint32_t n = count(chain.instructions());
    for (uint32_t i = 0; i < n; ++i) {
      const auto* ins = chain.instructions()->Get(i);
      const std::string f = fmt::format("{}.instructions[{}]", at, i);
      // The verifier accepts a union tag without its table.
      if (ins->instr_args_type() != et::InstructionArguments::NONE && ins->instr_args() == nullptr) {
        fail_input("{}: {}.{}: instr_args_type {} without instr_args", name, where, f,
                   static_cast<int>(ins->instr_args_type()));
      }
      switch (ins->instr_args_type()) {
        case et::InstructionArguments::KernelCall: {
          const auto* k = ins->instr_args_as_KernelCall();
          index(k->op_index(), count(ep.operators()), f + ".op_index");
          indices(k->args(), values, f + ".args");
          break;
        }
        case et::InstructionArguments::DelegateCall: {
          const auto* d = ins->instr_args_as_DelegateCall();
          index(d->delegate_index(), count(ep.delegates()), f + ".delegate_index");
          indices(d->args(), values, f + ".args");
          break;
        }
        case et::InstructionArguments::MoveCall: {
          const auto* m = ins->instr_args_as_MoveCall();
          index(m->move_from(), values, f + ".move_from");
          index(m->move_to(), values, f + ".move_to");
          break;
        }
        case et::InstructionArguments::JumpFalseCall: {
          const auto* j = ins->instr_args_as_JumpFalseCall();
          index(j->cond_value_index(), values, f + ".cond_value_index");
          index(j->destination_instruction(), n, f + ".destination_instruction");
          break;
        }
        case et::InstructionArguments::FreeCall:
          index(ins->instr_args_as_FreeCall()->value_index(), values, f + ".value_index");
          break;
        default:
          break;  // NONE or an unknown tag (recorded as not rewritable)
      }
    }
  }

  void delegate(const et::BackendDelegate& d, uint32_t i) {
    const std::string at = fmt::format("delegates[{}]", i);
    if (d.id() == nullptr) fail_input("{}: {}.{} has no id", name, where, at);
    if (d.processed() == nullptr) fail_input("{}: {}.{} has no processed data", name, where, at);
    Delegate info{plan, d.id()->str(), d.processed()->location() == et::DataLocation::INLINE,
                  d.processed()->index(), 0};
    if (info.inline_data) {
      index(info.index, count(root.backend_delegate_data()), at + ".processed.index");
      const auto* data = root.backend_delegate_data()->Get(info.index)->data();
      info.size = count(data);
    } else {
      index(info.index, static_cast<uint32_t>(out.segments.size()), at + ".processed.index");
      info.size = out.segments[info.index].size;
    }
    out.delegates.push_back(std::move(info));
  }

  void value(const et::EValue& v, uint32_t i, uint32_t values) {
    const std::string at = fmt::format("values[{}]", i);
    if (const auto* list = v.val_as_TensorList()) indices(list->items(), values, at + ".items");
    if (const auto* list = v.val_as_OptionalTensorList()) {
      indices(list->items(), values, at + ".items", true);
    }
    if (const auto* t = v.val_as_Tensor()) tensor(*t, i, at);
  }

  void tensor(const et::Tensor& t, uint32_t value, const std::string& at) {
    TensorInfo info;
    info.plan = plan;
    info.value = value;
    info.table = &t;
    info.scalar_type = static_cast<int>(t.scalar_type());
    auto dtype = dtype_from_ptd(info.scalar_type);
    info.known_type = dtype.has_value();
    info.dtype = dtype.value_or(DType::BYTE);
    const auto* sizes = t.sizes();
    if (count(sizes) > Limits::max_rank) {
      fail_input("{}: {}.{}: rank {} exceeds the limit {}", name, where, at, count(sizes),
                 Limits::max_rank);
    }
    for (uint32_t d = 0; d < count(sizes); ++d) {
      if (sizes->Get(d) < 0) {
        fail_input("{}: {}.{}.sizes[{}] = {} is negative", name, where, at, d, sizes->Get(d));
      }
      info.shape.push_back(sizes->Get(d));
    }
    if (const auto* order = t.dim_order()) {
      std::vector<bool> seen(info.shape.size(), false);
      bool ok = order->size() == info.shape.size();
      for (uint32_t d = 0; ok && d < order->size(); ++d) {
        const uint8_t o = order->Get(d);
        ok = o < seen.size() && !seen[o];
        if (ok) seen[o] = true;
        info.dim_order.push_back(o);
      }
      if (!ok) {
        fail_input("{}: {}.{}.dim_order [{}] is not a permutation of {} dimensions", name, where,
                   at, fmt::join(*order, ", "), info.shape.size());
      }
    }
    info.buffer_index = t.data_buffer_idx();
    info.planned = t.allocation_info() != nullptr;
    const auto* extra = t.extra_tensor_info();
    if (extra != nullptr && extra->fully_qualified_name() != nullptr) {
      info.fqn = extra->fully_qualified_name()->str();
    }
    if (extra != nullptr && extra->location() == et::TensorDataLocation::EXTERNAL) {
      info.storage = Storage::external;
      if (info.fqn.empty()) {
        fail_input("{}: {}.{}: EXTERNAL tensor without a fully_qualified_name", name, where, at);
      }
      check_name(info.fqn, "fully_qualified_name", fmt::format("{}: {}.{}", name, where, at));
    } else if (info.buffer_index > 0) {
      info.storage = info.planned ? Storage::mutable_state
                     : count(root.constant_buffer()) > 0 &&
                             (root.constant_segment() == nullptr ||
                              count(root.constant_segment()->offsets()) == 0)
                         ? Storage::constant_buffer
                         : Storage::constant_segment;
    }
    if (info.storage != Storage::none && info.storage != Storage::external) {
      auto n = info.known_type ? byte_size(info.dtype, info.shape) : std::nullopt;
      if (!n) {
        fail_input("{}: {}.{}: cannot size a stored tensor of scalar type {} and shape [{}]", name,
                   where, at, info.scalar_type, fmt::join(info.shape, ", "));
      }
      info.nbytes = *n;
      locate(info, extra, at);
    }
    out.tensors.push_back(std::move(info));
  }

  // Finds a stored tensor's bytes and checks they lie inside their segment or buffer.
  void locate(TensorInfo& info, const et::ExtraTensorInfo* extra, const std::string& at) const {
    const auto& segments = out.segments;
    const et::SubsegmentOffsets* sub = nullptr;
    std::string table = "constant_segment";
    if (info.storage == Storage::constant_buffer) {
      const auto* buffers = root.constant_buffer();
      index(info.buffer_index, count(buffers), at + ".data_buffer_idx");
      const auto* storage = buffers->Get(info.buffer_index)->storage();
      if (storage == nullptr && info.nbytes == 0) {
        info.bytes = ByteRange{out.file, 0, 0};
        return;
      }
      if (count(storage) < info.nbytes) {
        fail_input("{}: {}.{}: {} bytes but constant_buffer[{}] holds {}", name, where, at,
                   info.nbytes, info.buffer_index, count(storage));
      }
      auto offset = static_cast<uint64_t>(storage->Data() - out.flatbuffer.data());
      info.bytes = ByteRange{out.file, offset, info.nbytes};
      return;
    }
    if (info.storage == Storage::mutable_state) {
      const uint64_t which = extra != nullptr ? extra->mutable_data_segments_idx() : 0;
      if (which >= count(root.mutable_data_segments())) {
        fail_input("{}: {}.{}: mutable_data_segments_idx {} is out of range ({} entries)", name,
                   where, at, which, count(root.mutable_data_segments()));
      }
      sub = root.mutable_data_segments()->Get(static_cast<uint32_t>(which));
      table = fmt::format("mutable_data_segments[{}]", which);
    } else {
      sub = root.constant_segment();
    }
    const uint32_t offsets = sub == nullptr ? 0 : count(sub->offsets());
    if (info.buffer_index >= offsets) {
      fail_input("{}: {}.{}: data_buffer_idx {} is out of range ({}.offsets has {})", name, where,
                 at, info.buffer_index, table, offsets);
    }
    const Segment& segment = segments[sub->segment_index()];  // checked by read()
    const uint64_t offset = sub->offsets()->Get(info.buffer_index);
    if (!range_within(offset, info.nbytes, segment.size)) {
      fail_input("{}: {}.{}: {} bytes at offset {} run past {} (segment {} of {} bytes)", name,
                 where, at, info.nbytes, offset, table, sub->segment_index(), segment.size);
    }
    info.bytes = ByteRange{out.file, segment.offset + offset, info.nbytes};
  }
};

void check_subsegment(const std::string& name, const et::SubsegmentOffsets& sub,
                      const std::vector<Segment>& segments, const std::string& what) {
  if (count(sub.offsets()) == 0) return;
  if (sub.segment_index() >= segments.size()) {
    fail_input("{}: {}.segment_index {} is out of range ({} segments)", name, what,
               sub.segment_index(), segments.size());
  }
  const uint64_t size = segments[sub.segment_index()].size;
  for (uint32_t k = 0; k < sub.offsets()->size(); ++k) {
    if (sub.offsets()->Get(k) > size) {
      fail_input("{}: {}.offsets[{}] = {} is past the end of segment {} ({} bytes)", name, what, k,
                 sub.offsets()->Get(k), sub.segment_index(), size);
    }
  }
}

void read_segments(const std::string& name, const et::Program& root, Program& out) {
  const Header& h = out.header;
  const uint64_t data_end = h.segment_base + h.segment_data_size;
  const bool sized = h.present && h.length >= header_length;
  std::vector<std::pair<uint64_t, uint64_t>> used;
  uint64_t alignment = kMaxAlignment * 16;
  for (uint32_t s = 0; s < count(root.segments()); ++s) {
    const auto* seg = root.segments()->Get(s);
    Segment segment{h.segment_base + seg->offset(), seg->size()};
    if (seg->size() > 0) {
      if (h.segment_base == 0) {
        fail_input("{}: segments[{}] holds {} bytes but the file has no segment base (eh00)", name,
                   s, seg->size());
      }
      auto end = checked_add(h.segment_base, seg->offset());
      end = end ? checked_add(*end, seg->size()) : std::nullopt;
      if (!end || *end > out.file->size() || (sized && *end > data_end)) {
        fail_input("{}: segments[{}] (offset {}, size {}) runs past the segment data", name, s,
                   seg->offset(), seg->size());
      }
      used.emplace_back(segment.offset, *end);
      alignment = std::min(alignment, low_bit(segment.offset));
    }
    out.segments.push_back(segment);
  }
  std::sort(used.begin(), used.end());
  for (size_t k = 1; k < used.size(); ++k) {
    if (used[k].first < used[k - 1].second) {
      fail_input("{}: segments overlap at file offset {}", name, used[k].first);
    }
  }
  if (h.segment_base != 0) alignment = std::min(alignment, low_bit(h.segment_base));
  out.segment_alignment = used.empty() ? 1 : alignment;
}

}  // namespace

std::string_view storage_name(Storage storage) {
  switch (storage) {
    case Storage::constant_segment:
      return "constant segment";
    case Storage::constant_buffer:
      return "constant_buffer";
    case Storage::external:
      return "external";
    case Storage::mutable_state:
      return "mutable state";
    case Storage::none:
      break;
  }
  return "none";
}

const et::Program* Program::root() const { return et::GetProgram(flatbuffer.data()); }

bool looks_like_pte(std::span<const uint8_t> head) {
  return head.size() >= 8 && std::string_view(reinterpret_cast<const char*>(&head[4]), 4) == "ET12";
}

Program read(const InputFilePtr& file) {
  const std::string& name = file->name();
  Program out;
  out.file = file;
  out.header = read_header(*file);
  out.flatbuffer = file->read_range(0, out.header.program_size);

  fb::Verifier::Options options;
  options.max_depth = 64;
  options.max_tables = 64'000'000;
  options.check_alignment = true;
  fb::Verifier verifier(out.flatbuffer.data(), out.flatbuffer.size(), options);
  if (!et::VerifyProgramBuffer(verifier)) {
    fail_input("{}: Program flatbuffer ({} bytes) failed verification", name,
               out.flatbuffer.size());
  }
  const et::Program& root = *out.root();
  detail::find_unknown(reinterpret_cast<const fb::Table*>(&root), et::ProgramTypeTable(),
                       out.not_rewritable);
  if (root.execution_plan() == nullptr || root.execution_plan()->size() == 0) {
    fail_input("{}: program has no execution plans", name);
  }
  read_segments(name, root, out);

  const auto* constants = root.constant_segment();
  if (constants != nullptr) {
    check_subsegment(name, *constants, out.segments, "constant_segment");
    if (count(constants->offsets()) > 0 && count(root.constant_buffer()) > 0) {
      fail_input("{}: both constant_buffer ({} entries) and constant_segment.offsets are used",
                 name, count(root.constant_buffer()));
    }
  }
  for (uint32_t k = 0; k < count(root.mutable_data_segments()); ++k) {
    check_subsegment(name, *root.mutable_data_segments()->Get(k), out.segments,
                     fmt::format("mutable_data_segments[{}]", k));
  }

  std::set<std::string> keys;
  for (uint32_t k = 0; k < count(root.named_data()); ++k) {
    const auto* nd = root.named_data()->Get(k);
    if (nd->key() == nullptr || nd->key()->size() == 0 ||
        nd->key()->size() > Limits::max_key_length ||
        std::string_view(nd->key()->c_str(), nd->key()->size()).find('\0') !=
            std::string_view::npos) {
      fail_input("{}: named_data[{}]: key must be 1 to {} bytes without NUL", name, k,
                 Limits::max_key_length);
    }
    std::string key = nd->key()->str();
    check_name(key, "key", fmt::format("{}: named_data[{}]", name, k));
    if (!keys.insert(key).second) fail_input("{}: named_data: duplicate key {}", name, quote(key));
    if (nd->segment_index() >= out.segments.size()) {
      fail_input("{}: named_data[{}] (key {}): segment_index {} is out of range ({} segments)",
                 name, k, quote(key), nd->segment_index(), out.segments.size());
    }
    const Segment& seg = out.segments[nd->segment_index()];
    out.named_data.push_back({std::move(key), nd->segment_index(), {file, seg.offset, seg.size}});
  }

  std::set<std::string> plan_names;
  for (uint32_t p = 0; p < root.execution_plan()->size(); ++p) {
    const auto* ep = root.execution_plan()->Get(p);
    if (ep->name() == nullptr) fail_input("{}: execution_plan[{}] has no name", name, p);
    check_name(ep->name()->str(), "method name", fmt::format("{}: execution_plan[{}]", name, p));
    if (!plan_names.insert(ep->name()->str()).second) {
      fail_input("{}: execution_plan[{}]: duplicate method name {}", name, p,
                 quote(ep->name()->str()));
    }
    out.plans.push_back(ep->name()->str());
    PlanReader reader{name, out, root, p, *ep, fmt::format("execution_plan[{}]", p)};
    reader.run();
  }

  // Alignment that inline data and constant offsets keep in this file, never lowered on rewrite.
  auto aligned_at = [&](uint64_t offset, uint64_t current) {
    return std::min(current, std::clamp<uint64_t>(low_bit(offset), 16, kMaxAlignment));
  };
  uint64_t inline_alignment = kMaxAlignment;
  bool any_inline = false;
  for (uint32_t k = 0; k < count(root.backend_delegate_data()); ++k) {
    const auto* data = root.backend_delegate_data()->Get(k)->data();
    if (count(data) == 0) continue;
    any_inline = true;
    inline_alignment = aligned_at(static_cast<uint64_t>(data->Data() - out.flatbuffer.data()),
                                  inline_alignment);
  }
  for (uint32_t k = 0; k < count(root.constant_buffer()); ++k) {
    const auto* data = root.constant_buffer()->Get(k)->storage();
    if (count(data) == 0) continue;
    any_inline = true;
    inline_alignment = aligned_at(static_cast<uint64_t>(data->Data() - out.flatbuffer.data()),
                                  inline_alignment);
  }
  out.inline_alignment = any_inline ? inline_alignment : 16;
  uint64_t tensor_alignment = kMaxAlignment;
  bool any_offset = false;
  for (uint32_t k = 0; constants != nullptr && k < count(constants->offsets()); ++k) {
    if (constants->offsets()->Get(k) == 0) continue;
    any_offset = true;
    tensor_alignment = aligned_at(constants->offsets()->Get(k), tensor_alignment);
  }
  out.tensor_alignment = any_offset ? tensor_alignment : 16;
  return out;
}

}  // namespace ptepack::pte
