// libFuzzer target: the .pte (ExecuTorch program) reader, and for what it accepts the rewriter
// both ways (constants moved out as EXTERNAL; everything stored back inline), re-read.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "ptepack/pte/pte.h"
#include "ptepack/schema/pte_program_generated.h"

namespace {

namespace pte = ptepack::pte;
using pte::Storage;
using pte::TensorEdit;
using ptepack::ByteRange;
using ptepack::range_within;
using ptepack::fuzz::invariant_failed;

std::vector<uint8_t> bytes_of(const ByteRange& range) {
  return range.file->read_range(range.offset, range.size);
}

bool stored_inside(Storage s) {
  return s == Storage::constant_segment || s == Storage::constant_buffer;
}

bool power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// A stored tensor's range must lie in its file with its element count x element size: pack
// streams these ranges without checking them again.
void check_stored(const pte::Program& p, const pte::TensorInfo& t) {
  if (t.bytes.file != p.file) invariant_failed("pte: stored tensor without its file");
  auto expected = t.known_type ? ptepack::byte_size(t.dtype, t.shape) : std::nullopt;
  if (!expected || *expected != t.nbytes || t.bytes.size != t.nbytes) {
    invariant_failed("pte: stored tensor size disagrees with its dtype and shape");
  }
  const uint64_t limit =
      t.storage == Storage::constant_buffer ? p.header.program_size : p.file->size();
  if (!range_within(t.bytes.offset, t.bytes.size, limit)) {
    invariant_failed(std::string("pte: ") + std::string(pte::storage_name(t.storage)) +
                     " tensor range outside its region");
  }
}

// What read() promises about everything it accepts.
void check_read(const pte::Program& p) {
  const uint64_t size = p.file->size();
  if (p.flatbuffer.size() != p.header.program_size || p.header.program_size > size) {
    invariant_failed("pte: flatbuffer region disagrees with program_size");
  }
  const auto* plans = p.root()->execution_plan();
  if (p.plans.empty() || plans == nullptr || plans->size() != p.plans.size()) {
    invariant_failed("pte: plan list disagrees with the flatbuffer");
  }
  std::vector<std::pair<uint64_t, uint64_t>> used;
  for (const pte::Segment& s : p.segments) {
    if (s.size == 0) continue;
    if (!range_within(s.offset, s.size, size)) invariant_failed("pte: segment outside the file");
    used.emplace_back(s.offset, s.offset + s.size);
  }
  std::sort(used.begin(), used.end());
  for (size_t k = 1; k < used.size(); ++k) {
    if (used[k].first < used[k - 1].second) invariant_failed("pte: accepted overlapping segments");
  }
  for (const pte::TensorInfo& t : p.tensors) {
    if (t.plan >= p.plans.size() || t.table == nullptr) {
      invariant_failed("pte: tensor without plan");
    }
    if (stored_inside(t.storage) || t.storage == Storage::mutable_state) check_stored(p, t);
    if (t.storage == Storage::external && t.fqn.empty()) {
      invariant_failed("pte: EXTERNAL tensor without a name");
    }
  }
  for (const pte::NamedEntry& nd : p.named_data) {
    if (nd.segment >= p.segments.size() || nd.bytes.size != p.segments[nd.segment].size ||
        !range_within(nd.bytes.offset, nd.bytes.size, size)) {
      invariant_failed("pte: named data outside its segment or the file");
    }
  }
  for (const pte::Delegate& d : p.delegates) {
    if (d.plan >= p.plans.size()) invariant_failed("pte: delegate without plan");
    if (!d.inline_data && (d.index >= p.segments.size() || d.size != p.segments[d.index].size)) {
      invariant_failed("pte: delegate segment disagrees with the segment table");
    }
  }
  if (!power_of_two(p.segment_alignment) || p.segment_alignment > 65536 ||
      !power_of_two(p.inline_alignment) || p.inline_alignment < 16 || p.inline_alignment > 4096 ||
      !power_of_two(p.tensor_alignment) || p.tensor_alignment < 16 || p.tensor_alignment > 4096) {
    invariant_failed("pte: alignment out of its range");
  }
}

// Like externalize: every stored constant becomes EXTERNAL, named data all leaves.
pte::Rewrite externalize_plan(const pte::Program& p) {
  pte::Rewrite rw;
  rw.tensors.resize(p.tensors.size());
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const auto& t = p.tensors[i];
    if (!stored_inside(t.storage)) continue;
    rw.tensors[i].kind = TensorEdit::Kind::external;
    // Named by fqn or buffer, as externalize does: Tensor values sharing a table get one key.
    rw.tensors[i].key = t.fqn.empty() ? "constant_" + std::to_string(t.buffer_index) : t.fqn;
  }
  return rw;
}

// Like inline: every constant (and every EXTERNAL constant, from stand-in bytes of the right
// length) goes into the rebuilt constant segment; equal ranges share a buffer.
pte::Rewrite inline_plan(const pte::Program& p) {
  pte::Rewrite rw;
  rw.tensors.resize(p.tensors.size());
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> buffers;
  auto buffer_of = [&](const ByteRange& range) {
    auto [it, fresh] = buffers.emplace(std::make_pair(range.offset, range.size),
                                       static_cast<uint32_t>(rw.constants.size()));
    if (fresh) rw.constants.push_back(range);
    return it->second;
  };
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const auto& t = p.tensors[i];
    auto& edit = rw.tensors[i];
    if (stored_inside(t.storage)) {
      edit = {TensorEdit::Kind::constant, {}, buffer_of(t.bytes)};
    } else if (t.storage == Storage::external && !t.planned && t.known_type) {
      auto n = ptepack::byte_size(t.dtype, t.shape);
      if (n && *n <= p.file->size()) {
        edit = {TensorEdit::Kind::constant, {}, buffer_of(ByteRange{p.file, 0, *n})};
      }
    }
  }
  for (const auto& nd : p.named_data) rw.named_data.emplace_back(nd.key, nd.bytes);
  return rw;
}

// The rewritten file in a memfd: the head, then each piece at its offset. Gaps stay holes, so
// alignment padding costs no memory.
class LayoutFile {
 public:
  explicit LayoutFile(const char* name) {
    fd_ = ::memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) invariant_failed(std::string("memfd_create: ") + std::strerror(errno));
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~LayoutFile() { ::close(fd_); }
  LayoutFile(const LayoutFile&) = delete;
  LayoutFile& operator=(const LayoutFile&) = delete;

  ptepack::InputFilePtr assign(const pte::Layout& layout) {
    if (::ftruncate(fd_, 0) != 0) invariant_failed("ftruncate of the memfd failed");
    write_at(0, reinterpret_cast<const uint8_t*>(layout.head.data()), layout.head.size());
    for (const auto& [at, range] : layout.pieces) {
      auto data = bytes_of(range);
      write_at(at, data.data(), data.size());
    }
    if (::ftruncate(fd_, static_cast<off_t>(layout.file_size)) != 0) {
      invariant_failed("ftruncate of the memfd failed");
    }
    return ptepack::InputFile::open(path_);
  }

 private:
  void write_at(uint64_t offset, const uint8_t* data, size_t size) const {
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) invariant_failed(std::string("pwrite: ") + std::strerror(errno));
      done += static_cast<size_t>(n);
    }
  }

  int fd_ = -1;
  std::string path_;
};

// The layout must be a file: head first, pieces ascending and disjoint inside it, each piece a
// range of an input that exists. (The file may end in padding: a zero-length constant placed
// after the last one sits at an aligned offset the segment's size includes.)
void check_layout(const pte::Layout& layout) {
  if (layout.head.size() > layout.file_size) {
    invariant_failed("pte rewrite: head past the file end");
  }
  uint64_t end = layout.head.size();
  for (const auto& [at, range] : layout.pieces) {
    if (at < end || range.size == 0 || !range_within(at, range.size, layout.file_size)) {
      invariant_failed("pte rewrite: pieces overlap, are empty or run past the file end");
    }
    if (range.file == nullptr || !range_within(range.offset, range.size, range.file->size())) {
      invariant_failed("pte rewrite: piece outside its source file");
    }
    end = at + range.size;
  }
}

bool same_layout(const pte::Layout& a, const pte::Layout& b) {
  if (a.head != b.head || a.file_size != b.file_size || a.pieces.size() != b.pieces.size()) {
    return false;
  }
  for (size_t k = 0; k < a.pieces.size(); ++k) {
    const auto& [x, rx] = a.pieces[k];
    const auto& [y, ry] = b.pieces[k];
    if (x != y || rx.file != ry.file || rx.offset != ry.offset || rx.size != ry.size) return false;
  }
  return true;
}

// Rewrites, re-reads the result, and checks it is the same program with the edits applied.
void check_rewrite(const pte::Program& p, const pte::Rewrite& rw, LayoutFile& out,
                   const std::string& what) {
  pte::Layout layout;
  try {
    layout = pte::rewrite(p, rw);
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
    const std::string message = e.what();
    if (!p.not_rewritable.empty()) {
      if (message.find("cannot rewrite") == std::string::npos) {
        invariant_failed(what + ": refusal does not say why: " + message);
      }
      return;
    }
    if (message.find("2 GiB") != std::string::npos ||
        message.find("overflows") != std::string::npos) {
      return;  // limits of the format, not of the program
    }
    invariant_failed(what + ": rewrite rejects an accepted program: " + message);
  }
  if (!p.not_rewritable.empty()) {
    invariant_failed(what + ": rewrote a program it would lose fields of: " + p.not_rewritable[0]);
  }
  check_layout(layout);
  if (!same_layout(layout, pte::rewrite(p, rw))) invariant_failed(what + ": not deterministic");

  pte::Program again;
  try {
    again = pte::read(out.assign(layout));
  } catch (const ptepack::Error& e) {
    invariant_failed(what + ": rewritten program does not read back: " + e.what());
  }
  check_read(again);
  if (!again.not_rewritable.empty()) {
    invariant_failed(what + ": rewritten program is not rewritable: " + again.not_rewritable[0]);
  }
  if (again.plans != p.plans || again.tensors.size() != p.tensors.size() ||
      again.delegates.size() != p.delegates.size()) {
    invariant_failed(what + ": rewritten program has other plans, tensors or delegates");
  }
  const auto* cs = again.root()->constant_segment();
  const auto* cb = again.root()->constant_buffer();
  if (cs == nullptr || cs->offsets() == nullptr ||
      cs->offsets()->size() != rw.constants.size() + 1 || (cb != nullptr && cb->size() != 0)) {
    invariant_failed(what + ": rewritten program lacks its constant segment");
  }
  for (size_t d = 0; d < p.delegates.size(); ++d) {
    const auto& a = p.delegates[d];
    const auto& b = again.delegates[d];
    if (a.plan != b.plan || a.id != b.id || a.inline_data != b.inline_data || a.size != b.size) {
      invariant_failed(what + ": a delegate changed");
    }
    if (!a.inline_data) {
      const auto& sa = p.segments[a.index];
      const auto& sb = again.segments[b.index];
      if (bytes_of({p.file, sa.offset, sa.size}) != bytes_of({again.file, sb.offset, sb.size})) {
        invariant_failed(what + ": a delegate segment changed");
      }
    }
  }
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const auto& a = p.tensors[i];
    const auto& b = again.tensors[i];
    if (std::tie(a.plan, a.value, a.scalar_type, a.shape, a.dim_order, a.planned) !=
        std::tie(b.plan, b.value, b.scalar_type, b.shape, b.dim_order, b.planned)) {
      invariant_failed(what + ": a tensor's layout changed");
    }
    const TensorEdit& e = rw.tensors[i];
    switch (e.kind) {
      case TensorEdit::Kind::external:
        if (b.storage != Storage::external || b.fqn != e.key) {
          invariant_failed(what + ": an externalized tensor is not EXTERNAL under its key");
        }
        break;
      case TensorEdit::Kind::constant:
        if (b.storage != Storage::constant_segment || b.buffer_index != e.buffer + 1 ||
            bytes_of(b.bytes) != bytes_of(rw.constants[e.buffer])) {
          invariant_failed(what + ": an inlined tensor does not hold its buffer's bytes");
        }
        break;
      case TensorEdit::Kind::keep:
        if (b.storage != a.storage || b.fqn != a.fqn || b.buffer_index != a.buffer_index ||
            (a.storage == Storage::mutable_state && bytes_of(a.bytes) != bytes_of(b.bytes))) {
          invariant_failed(what + ": a kept tensor changed");
        }
        break;
    }
  }
  if (again.named_data.size() != rw.named_data.size() ||
      (rw.named_data.empty() && again.root()->named_data() != nullptr)) {
    invariant_failed(what + ": named data differs from the plan");
  }
  for (size_t k = 0; k < rw.named_data.size(); ++k) {
    if (again.named_data[k].key != rw.named_data[k].first ||
        bytes_of(again.named_data[k].bytes) != bytes_of(rw.named_data[k].second)) {
      invariant_failed(what + ": a named data entry differs");
    }
  }
}

void run(const uint8_t* data, size_t size) {
  static ptepack::fuzz::MemoryFile input("fuzz.pte");
  static LayoutFile externalized("externalized.pte");
  static LayoutFile inlined("inlined.pte");
  input.assign(data, size);
  pte::Program program;
  try {
    program = pte::read(ptepack::InputFile::open(input.path()));
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
    return;
  }
  check_read(program);
  check_rewrite(program, externalize_plan(program), externalized, "externalized");
  check_rewrite(program, inline_plan(program), inlined, "inlined");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Only ptepack::Error may leave the reader and the rewriter (handled in run()).
  try {
    run(data, size);
  } catch (const std::exception& e) {
    invariant_failed(std::string("exception other than ptepack::Error: ") + e.what());
  } catch (...) {
    invariant_failed("exception other than ptepack::Error");
  }
  return 0;
}
