// Tests for the .pte (ExecuTorch program) reader on real programs, its rejection of corrupt ones,
// and the rewriter's refusal of fields beyond the schema.
#include <flatbuffers/flatbuffers.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/byte_reader.h"
#include "ptepack/base/error.h"
#include "ptepack/pte/pte.h"
#include "ptepack/hash/sha256.h"
#include "ptepack/schema/pte_program_generated.h"
#include "test_support.h"

namespace fs = std::filesystem;
namespace fb = flatbuffers;
namespace et = executorch_flatbuffer;
namespace pte = ptepack::pte;
using Catch::Matchers::Contains;
using pte::Storage;
using ptepack::ErrorCode;

namespace {

// tmpfs when there is one: the sweeps below write thousands of files.
struct PteDir : ptepack::test::ScratchDir {
  PteDir() : ptepack::test::ScratchDir("pte") {}
};

std::string fixture(const std::string& name) {
  std::ifstream in(ptepack::test::data_path("pte/" + name), std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

pte::Program read_fixture(const std::string& name) {
  return pte::read(ptepack::InputFile::open(ptepack::test::data_path("pte/" + name)));
}

pte::Program read_bytes(const PteDir& dir, const std::string& bytes,
                        const std::string& name = "bad.pte") {
  {
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
  }
  return pte::read(ptepack::InputFile::open(dir / name));
}

// Reads must fail with invalid_input and a message containing `needle`.
void expect_invalid(const PteDir& dir, const std::string& bytes, const std::string& needle) {
  try {
    (void)read_bytes(dir, bytes);
    FAIL("read succeeded, expected: " << needle);
  } catch (const ptepack::Error& e) {
    CHECK(e.code() == ErrorCode::invalid_input);
    CHECK_THAT(e.what(), Contains(needle) && Contains("bad.pte: "));
  }
}

std::vector<uint8_t> bytes_of(const ptepack::ByteRange& range) {
  return range.file->read_range(range.offset, range.size);
}

template <typename T>
void store(std::string& bytes, size_t at, T value) {
  REQUIRE(at + sizeof(T) <= bytes.size());
  for (size_t i = 0; i < sizeof(T); ++i) {
    bytes[at + i] = static_cast<char>(static_cast<uint64_t>(value) >> (8 * i));
  }
}

// Byte positions inside a program's flatbuffer, found through the generated accessors and the
// vtables, so corruptions patch the field they mean whatever the exporter's layout.
class Fields {
 public:
  explicit Fields(const std::string& bytes) : bytes_(bytes) {}

  [[nodiscard]] const et::Program& root() const { return *et::GetProgram(bytes_.data()); }

  // File offset of a table's field (a VT_ constant of its generated type); the field must be
  // present, since a default left out of the vtable has no bytes to patch.
  template <typename Table>
  [[nodiscard]] size_t field(const Table* table, fb::voffset_t vt) const {
    const auto* t = reinterpret_cast<const fb::Table*>(table);
    const fb::voffset_t at = t->GetOptionalFieldOffset(vt);
    REQUIRE(at != 0);
    return offset_of(t) + at;
  }

  // File offset of a scalar vector's element k.
  template <typename T>
  [[nodiscard]] size_t element(const fb::Vector<T>* v, uint32_t k) const {
    REQUIRE(v != nullptr);
    REQUIRE(k < v->size());
    return offset_of(v->Data()) + sizeof(T) * k;
  }

 private:
  [[nodiscard]] size_t offset_of(const void* p) const {
    return static_cast<size_t>(static_cast<const char*>(p) - bytes_.data());
  }
  const std::string& bytes_;
};

uint64_t header_u64(const std::string& bytes, size_t at) {
  return ptepack::load_u64(reinterpret_cast<const uint8_t*>(bytes.data()) + at);
}

// The inline front end's plan: every stored constant back into the rebuilt constant segment.
pte::Rewrite inline_plan(const pte::Program& p) {
  pte::Rewrite rw;
  rw.tensors.resize(p.tensors.size());
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const auto& t = p.tensors[i];
    if (t.storage != Storage::constant_segment && t.storage != Storage::constant_buffer) continue;
    rw.tensors[i] = {
        pte::TensorEdit::Kind::constant, {}, static_cast<uint32_t>(rw.constants.size())};
    rw.constants.push_back(t.bytes);
  }
  for (const auto& nd : p.named_data) rw.named_data.emplace_back(nd.key, nd.bytes);
  return rw;
}

std::string file_of(const pte::Layout& layout) {
  std::string out = layout.head;
  out.resize(static_cast<size_t>(layout.file_size), '\0');
  for (const auto& [at, range] : layout.pieces) {
    auto data = bytes_of(range);
    std::copy(data.begin(), data.end(), out.begin() + static_cast<std::ptrdiff_t>(at));
  }
  return out;
}

// A program built here: method "forward" with `values` and one chain of `instructions`.
template <typename Build>
std::string small_program(Build&& build) {
  fb::FlatBufferBuilder b;
  build(b);
  return {reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize()};
}

fb::Offset<et::Program> program_of(fb::FlatBufferBuilder& b,
                                   std::vector<fb::Offset<et::EValue>> values,
                                   std::vector<fb::Offset<et::Instruction>> instructions,
                                   fb::Offset<fb::Vector<fb::Offset<et::Buffer>>> buffers = 0) {
  const auto chain = et::CreateChain(b, 0, 0, b.CreateVector(instructions));
  const auto plan =
      et::CreateExecutionPlan(b, b.CreateString("forward"), 0, b.CreateVector(values), 0, 0,
                              b.CreateVector(std::vector<fb::Offset<et::Chain>>{chain}));
  return et::CreateProgram(b, 0, b.CreateVector(std::vector<fb::Offset<et::ExecutionPlan>>{plan}),
                           buffers);
}

// A program built here: one method "forward", and one field at `extra_slot` (a slot number
// past the schema's fields) with value 7 in the Program table or in the ExecutionPlan table.
std::string program_with_extra_field(bool in_plan, uint16_t extra_slot) {
  fb::FlatBufferBuilder b;
  const auto extra_field = static_cast<fb::voffset_t>(4 + 2 * extra_slot);
  const auto name = b.CreateString("forward");
  auto start = b.StartTable();
  b.AddOffset(et::ExecutionPlan::VT_NAME, name);
  if (in_plan) b.AddElement<uint32_t>(extra_field, 7, 0);
  const fb::Offset<et::ExecutionPlan> plan(b.EndTable(start));
  const auto plans = b.CreateVector(std::vector<fb::Offset<et::ExecutionPlan>>{plan});
  start = b.StartTable();
  b.AddOffset(et::Program::VT_EXECUTION_PLAN, plans);
  if (!in_plan) b.AddElement<uint32_t>(extra_field, 7, 0);
  const fb::Offset<et::Program> root(b.EndTable(start));
  b.Finish(root, et::ProgramIdentifier());
  return {reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize()};
}

}  // namespace

TEST_CASE("pte: real programs read with their header, segments and named data") {
  struct Expect {
    std::string file;
    bool header;
    size_t segments;
    size_t named;
    std::vector<std::string> plans;
  };
  const std::vector<Expect> all{
      {"xnnpack_conv.pte", true, 4, 2, {"forward"}},
      {"xnnpack_quantized.pte", true, 4, 2, {"forward"}},
      {"portable_multi_method.pte", true, 1, 0, {"double", "forward"}},
      {"portable_keyword_spotting.pte", true, 1, 0, {"forward"}},
      {"portable_add_no_header.pte", false, 1, 0, {"forward"}},
      {"portable_inline_constant_buffer.pte", false, 0, 0, {"forward"}},
      {"external_pair.pte", false, 1, 0, {"forward"}},
  };
  for (const Expect& x : all) {
    INFO(x.file);
    const std::string bytes = fixture(x.file);
    const pte::Program p = read_fixture(x.file);
    CHECK(p.header.present == x.header);
    CHECK(p.segments.size() == x.segments);
    CHECK(p.named_data.size() == x.named);
    CHECK(p.plans == x.plans);
    CHECK(p.not_rewritable.empty());
    if (x.header) {
      CHECK(p.header.length == pte::header_length);
      CHECK(p.header.program_size == header_u64(bytes, 16));
      CHECK(p.header.segment_base == header_u64(bytes, 24));
      // ExecuTorch writes no padding after the last segment.
      CHECK(p.header.segment_base + p.header.segment_data_size == bytes.size());
    } else {
      CHECK(p.header.program_size == bytes.size());
    }
    CHECK(p.flatbuffer.size() == p.header.program_size);
    // Stored bytes are element count x element size, inside their segment.
    for (const auto& t : p.tensors) {
      if (t.storage != Storage::constant_segment && t.storage != Storage::constant_buffer) continue;
      CHECK(t.nbytes == ptepack::byte_size(t.dtype, t.shape));
      CHECK(t.bytes.size == t.nbytes);
      CHECK(t.bytes.offset + t.bytes.size <= bytes.size());
    }
  }
}

TEST_CASE("pte: XNNPACK named data keys are the SHA-256 of their segments") {
  const pte::Program p = read_fixture("xnnpack_conv.pte");
  REQUIRE(p.named_data.size() == 2);
  CHECK(p.named_data[0].key == "4c3f6bb8c660e2c0de7cd206675fdd33376839dd2b3a58e20015234db0883476");
  CHECK(p.named_data[1].key == "c4c4938264282aadf317c0e9375feac4a81ae10f994ab747f65cae591f57275f");
  for (const auto& nd : p.named_data) {
    INFO(nd.key);
    CHECK(nd.bytes.offset == p.segments[nd.segment].offset);
    CHECK(nd.bytes.size == p.segments[nd.segment].size);
    CHECK(ptepack::to_hex(ptepack::sha256(bytes_of(nd.bytes))) == nd.key);
  }
  CHECK(p.named_data[0].segment == 2);
  CHECK(p.named_data[1].segment == 3);
  REQUIRE(p.delegates.size() == 1);
  CHECK(p.delegates[0].id == "XnnpackBackend");
  CHECK_FALSE(p.delegates[0].inline_data);
  CHECK(p.delegates[0].index == 1);
  CHECK(p.delegates[0].size == 1136);
  // Segment 0 is the empty constant segment ExecuTorch always emits.
  CHECK(p.segments[0].size == 0);
  CHECK(p.segments[1].offset == p.header.segment_base);
}

TEST_CASE("pte: constants in the constant segment, shared buffers with different shapes") {
  const pte::Program p = read_fixture("portable_keyword_spotting.pte");
  const auto& seg = p.segments.at(p.root()->constant_segment()->segment_index());
  std::map<uint32_t, std::set<ptepack::Shape>> shapes_of_buffer;
  size_t constants = 0;
  for (const auto& t : p.tensors) {
    if (t.storage != Storage::constant_segment) continue;
    ++constants;
    INFO("value " << t.value);
    REQUIRE(t.known_type);
    CHECK(t.nbytes == ptepack::byte_size(t.dtype, t.shape));
    CHECK(t.bytes.size == t.nbytes);
    CHECK(t.bytes.offset >= seg.offset);
    CHECK(t.bytes.offset + t.bytes.size <= seg.offset + seg.size);
    CHECK(t.bytes.offset ==
          seg.offset + p.root()->constant_segment()->offsets()->Get(t.buffer_index));
    CHECK_FALSE(t.planned);
    shapes_of_buffer[t.buffer_index].insert(t.shape);
  }
  CHECK(constants == 83);
  CHECK(std::any_of(shapes_of_buffer.begin(), shapes_of_buffer.end(),
                    [](const auto& entry) { return entry.second.size() > 1; }));

  // Two methods each holding the same 8-byte constant.
  const pte::Program multi = read_fixture("portable_multi_method.pte");
  std::vector<const pte::TensorInfo*> stored;
  for (const auto& t : multi.tensors) {
    if (t.storage == Storage::constant_segment) stored.push_back(&t);
  }
  REQUIRE(stored.size() == 2);
  CHECK(stored[0]->plan == 0);
  CHECK(stored[1]->plan == 1);
  for (const auto* t : stored) {
    CHECK(t->dtype == ptepack::DType::LONG);
    CHECK(t->shape.empty());
    CHECK(t->nbytes == 8);
  }
}

TEST_CASE("pte: the deprecated inline constant_buffer program reads its constants") {
  const pte::Program p = read_fixture("portable_inline_constant_buffer.pte");
  CHECK_FALSE(p.header.present);
  CHECK(p.segments.empty());
  const auto* buffers = p.root()->constant_buffer();
  REQUIRE(buffers != nullptr);
  size_t constants = 0;
  for (const auto& t : p.tensors) {
    if (t.storage != Storage::constant_buffer) continue;
    ++constants;
    INFO("value " << t.value);
    CHECK(t.dtype == ptepack::DType::FLOAT);
    CHECK(t.shape == ptepack::Shape{2, 2});
    CHECK(t.nbytes == 16);
    // The bytes are the Buffer.storage vector inside the flatbuffer.
    const auto* storage = buffers->Get(t.buffer_index)->storage();
    REQUIRE(storage != nullptr);
    CHECK(t.bytes.offset == static_cast<uint64_t>(storage->Data() - p.flatbuffer.data()));
    CHECK(t.bytes.offset + t.bytes.size <= p.header.program_size);
    CHECK(bytes_of(t.bytes) == std::vector<uint8_t>(storage->begin(), storage->begin() + 16));
  }
  CHECK(constants == 2);
}

TEST_CASE("pte: external_pair has two EXTERNAL constants named a and b") {
  const pte::Program p = read_fixture("external_pair.pte");
  std::vector<std::string> names;
  for (const auto& t : p.tensors) {
    if (t.storage != Storage::external) continue;
    names.push_back(t.fqn);
    CHECK(t.dtype == ptepack::DType::FLOAT);
    CHECK(t.shape == ptepack::Shape{2, 2});
    CHECK_FALSE(t.planned);
  }
  CHECK(names == std::vector<std::string>{"a", "b"});
  for (const auto& t : p.tensors) {
    CHECK(t.storage != Storage::constant_segment);
    CHECK(t.storage != Storage::constant_buffer);
  }
}

TEST_CASE("pte: truncation at every byte offset is rejected") {
  PteDir dir;
  for (const char* name : {"portable_multi_method.pte", "xnnpack_conv.pte"}) {
    const std::string good = fixture(name);
    // Both end where their eh00 header says: every shorter file contradicts it.
    REQUIRE(header_u64(good, 24) + header_u64(good, 32) == good.size());
    for (size_t len = 0; len < good.size(); ++len) {
      INFO(name << " truncated to " << len);
      expect_invalid(dir, good.substr(0, len), "");
    }
  }
}

TEST_CASE("pte: flipped bytes in the flatbuffer never crash and only give invalid_input") {
  PteDir dir;
  std::mt19937 rng(20240611);
  for (const char* name : {"portable_multi_method.pte", "xnnpack_conv.pte"}) {
    const std::string good = fixture(name);
    const auto program_size = static_cast<size_t>(read_fixture(name).header.program_size);
    size_t accepted = 0;
    auto attempt = [&](const std::string& bad, const std::string& what) {
      INFO(name << ": " << what);
      pte::Program p;
      try {
        p = read_bytes(dir, bad, "flip.pte");
      } catch (const ptepack::Error& e) {
        INFO(e.what());
        CHECK(e.code() == ErrorCode::invalid_input);
        return;
      }
      ++accepted;
      if (!p.not_rewritable.empty()) return;
      // What the reader accepts and can rewrite comes back as a program it reads again.
      try {
        (void)read_bytes(dir, file_of(pte::rewrite(p, inline_plan(p))), "again.pte");
      } catch (const ptepack::Error& e) {
        FAIL_CHECK("rewritten program: " << e.what());
      }
    };
    for (size_t at = 0; at < program_size; ++at) {
      std::string bad = good;
      bad[at] = static_cast<char>(bad[at] ^ static_cast<char>(1 + rng() % 255));
      attempt(bad, "byte " + std::to_string(at));
    }
    for (int round = 0; round < 200; ++round) {
      std::string bad = good;
      const int flips = 2 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) {
        bad[rng() % program_size] = static_cast<char>(rng());
      }
      attempt(bad, "round " + std::to_string(round));
    }
    INFO(name << ": " << accepted << " flipped programs still read");
    CHECK(accepted < program_size);
  }
}

TEST_CASE("pte: header corruption is rejected naming the field") {
  PteDir dir;
  const std::string good = fixture("xnnpack_conv.pte");
  const uint64_t size = good.size();
  std::string bad = good;
  store<uint64_t>(bad, 16, size + 1);
  expect_invalid(dir, bad, "eh00 program_size 3361 is outside the file (3360 bytes");
  bad = good;
  store<uint64_t>(bad, 32, header_u64(good, 32) + 1);
  expect_invalid(dir, bad,
                 "eh00 segment_base_offset 1280 + segment_data_size 2081 is outside [program_size "
                 "1232, file size 3360]");
  bad = good;
  store<uint64_t>(bad, 24, 1024);  // the base inside the flatbuffer
  expect_invalid(dir, bad, "eh00 segment_base_offset 1024");
  bad = good;
  store<uint32_t>(bad, 12, 16);
  expect_invalid(dir, bad, "eh00 header length 16 is less than 24");
  bad = good;
  bad[5] = 'X';
  expect_invalid(dir, bad, "not an ExecuTorch program: identifier 'EX12' at offset 4");
  expect_invalid(dir, "1234", "4 bytes is too small for a .pte program");
}

TEST_CASE("pte: segment, named data and delegate corruption is rejected") {
  PteDir dir;
  const std::string good = fixture("xnnpack_conv.pte");
  const Fields f(good);
  const auto* segments = f.root().segments();
  REQUIRE(segments->size() == 4);

  SECTION("a segment past the end of the segment data") {
    std::string bad = good;
    store<uint64_t>(bad, f.field(segments->Get(3), et::DataSegment::VT_SIZE), 33);
    expect_invalid(dir, bad, "segments[3] (offset 2048, size 33) runs past the segment data");
  }
  SECTION("overlapping segments") {
    std::string bad = good;
    store<uint64_t>(bad, f.field(segments->Get(2), et::DataSegment::VT_OFFSET),
                    segments->Get(1)->offset());
    expect_invalid(dir, bad, "segments overlap at file offset 1280");
  }
  SECTION("named data segment_index out of range") {
    std::string bad = good;
    store<uint32_t>(bad, f.field(f.root().named_data()->Get(0), et::NamedData::VT_SEGMENT_INDEX),
                    4);
    expect_invalid(dir, bad, "named_data[0] (key '4c3f6bb8");
    expect_invalid(dir, bad, "segment_index 4 is out of range (4 segments)");
  }
  SECTION("delegate data index out of range") {
    const auto* delegate = f.root().execution_plan()->Get(0)->delegates()->Get(0);
    std::string bad = good;
    store<uint32_t>(bad, f.field(delegate->processed(), et::BackendDelegateDataReference::VT_INDEX),
                    4);
    expect_invalid(dir, bad,
                   "execution_plan[0].delegates[0].processed.index: index 4 is out of range (4 "
                   "entries)");
  }
}

TEST_CASE("pte: constant and instruction corruption is rejected") {
  PteDir dir;
  const std::string good = fixture("portable_multi_method.pte");
  const Fields f(good);
  const auto* constants = f.root().constant_segment();
  REQUIRE(constants->offsets()->size() == 2);
  const et::Tensor* constant = nullptr;
  uint32_t value = 0;
  const auto* values = f.root().execution_plan()->Get(0)->values();
  for (uint32_t v = 0; v < values->size() && constant == nullptr; ++v) {
    const auto* t = values->Get(v)->val_as_Tensor();
    if (t != nullptr && t->data_buffer_idx() > 0) {
      constant = t;
      value = v;
    }
  }
  REQUIRE(constant != nullptr);
  const std::string at = "execution_plan[0].values[" + std::to_string(value) + "]";

  SECTION("data_buffer_idx out of range") {
    std::string bad = good;
    store<uint32_t>(bad, f.field(constant, et::Tensor::VT_DATA_BUFFER_IDX), 2);
    expect_invalid(dir, bad,
                   at + ": data_buffer_idx 2 is out of range (constant_segment.offsets has 2)");
  }
  SECTION("a constant offset past its segment") {
    std::string bad = good;
    store<uint64_t>(bad, f.element(constants->offsets(), 1), 9);
    expect_invalid(dir, bad,
                   "constant_segment.offsets[1] = 9 is past the end of segment 0 (8 bytes)");
  }
  SECTION("a constant running past its segment") {
    std::string bad = good;
    store<uint64_t>(bad, f.element(constants->offsets(), 1), 4);
    expect_invalid(dir, bad,
                   at + ": 8 bytes at offset 4 run past constant_segment (segment 0 of 8 bytes)");
  }
  SECTION("an instruction's op_index out of range") {
    const et::KernelCall* call = nullptr;
    const auto* chain = f.root().execution_plan()->Get(0)->chains()->Get(0);
    uint32_t index = 0;
    for (uint32_t i = 0; i < chain->instructions()->size() && call == nullptr; ++i) {
      const auto* k = chain->instructions()->Get(i)->instr_args_as_KernelCall();
      if (k != nullptr && reinterpret_cast<const fb::Table*>(k)->GetOptionalFieldOffset(
                              et::KernelCall::VT_OP_INDEX) != 0) {
        call = k;
        index = i;
      }
    }
    REQUIRE(call != nullptr);
    std::string bad = good;
    store<int32_t>(bad, f.field(call, et::KernelCall::VT_OP_INDEX), 2);
    expect_invalid(dir, bad,
                   "execution_plan[0].chains[0].instructions[" + std::to_string(index) +
                       "].op_index: index 2 is out of range (2 entries)");
    store<int32_t>(bad, f.field(call, et::KernelCall::VT_OP_INDEX), -1);
    expect_invalid(dir, bad, "op_index: index -1 is out of range");
  }
}

TEST_CASE("pte: union tags without their table and buffers without storage") {
  PteDir dir;
  // The verifier accepts an Instruction whose tag names a member that is absent.
  for (int tag = 1; tag <= 5; ++tag) {
    INFO("tag " << tag);
    const std::string bytes = small_program([&](fb::FlatBufferBuilder& b) {
      const auto start = b.StartTable();
      b.AddElement<uint8_t>(et::Instruction::VT_INSTR_ARGS_TYPE, static_cast<uint8_t>(tag), 0);
      const fb::Offset<et::Instruction> ins(b.EndTable(start));
      b.Finish(program_of(b, {}, {ins}), et::ProgramIdentifier());
    });
    expect_invalid(dir, bytes,
                   "execution_plan[0].chains[0].instructions[0]: instr_args_type " +
                       std::to_string(tag) + " without instr_args");
  }
  // Likewise an EValue whose tag names a table that is absent (NONE included); the runtime
  // refuses every such value but Null ("Null value at index").
  for (int tag = 0; tag <= 10; ++tag) {
    INFO("value tag " << tag);
    const std::string bytes = small_program([&](fb::FlatBufferBuilder& b) {
      const auto start = b.StartTable();
      b.AddElement<uint8_t>(et::EValue::VT_VAL_TYPE, static_cast<uint8_t>(tag), 0xff);
      const fb::Offset<et::EValue> value(b.EndTable(start));
      b.Finish(program_of(b, {value}, {}), et::ProgramIdentifier());
    });
    if (tag == static_cast<int>(et::KernelTypes::Null)) {
      CHECK(read_bytes(dir, bytes).plans.size() == 1);
    } else {
      const std::string name = et::EnumNameKernelTypes(static_cast<et::KernelTypes>(tag));
      expect_invalid(dir, bytes,
                     "execution_plan[0].values[0]: val_type " + name + " without val");
    }
  }
  // A zero-element constant in a constant_buffer entry that has no storage vector holds no
  // bytes; one of 4 elements does not fit it.
  for (int32_t n : {0, 4}) {
    INFO("elements " << n);
    const std::string bytes = small_program([&](fb::FlatBufferBuilder& b) {
      const auto t = et::CreateTensor(b, et::ScalarType::FLOAT, 0,
                                      b.CreateVector(std::vector<int32_t>{n}), 0, false, 1);
      const auto value = et::CreateEValue(b, et::KernelTypes::Tensor, t.Union());
      const auto buffers = b.CreateVector(
          std::vector<fb::Offset<et::Buffer>>{et::CreateBuffer(b), et::CreateBuffer(b)});
      b.Finish(program_of(b, {value}, {}, buffers), et::ProgramIdentifier());
    });
    if (n == 0) {
      const pte::Program p = read_bytes(dir, bytes);
      REQUIRE(p.tensors.size() == 1);
      CHECK(p.tensors[0].storage == Storage::constant_buffer);
      CHECK(p.tensors[0].bytes.size == 0);
      CHECK(p.tensors[0].bytes.offset <= p.header.program_size);
      const pte::Program again =
          read_bytes(dir, file_of(pte::rewrite(p, inline_plan(p))), "again.pte");
      CHECK(again.tensors.at(0).storage == Storage::constant_segment);
    } else {
      expect_invalid(dir, bytes, "values[0]: 16 bytes but constant_buffer[1] holds 0");
    }
  }
}

TEST_CASE("pte: rewrite refuses fields beyond the schema, keeps a longer all-zero vtable") {
  PteDir dir;
  SECTION("in the Program table") {
    const pte::Program p = read_bytes(dir, program_with_extra_field(false, 8), "extra.pte");
    CHECK(p.plans == std::vector<std::string>{"forward"});
    REQUIRE(p.not_rewritable.size() == 1);
    CHECK(p.not_rewritable[0] == "Program: field slot 8 is beyond ptepack's schema");
    try {
      (void)pte::rewrite(p, pte::Rewrite{});
      FAIL("rewrite succeeded");
    } catch (const ptepack::Error& e) {
      CHECK(e.code() == ErrorCode::invalid_input);
      CHECK_THAT(e.what(), Contains("extra.pte: cannot rewrite: Program: field slot 8 is beyond "
                                    "ptepack's schema (ptepack would lose it"));
    }
  }
  SECTION("in a nested table") {
    const pte::Program p = read_bytes(dir, program_with_extra_field(true, 12), "extra.pte");
    REQUIRE(p.not_rewritable.size() == 1);
    CHECK(p.not_rewritable[0] ==
          "Program.execution_plan[0]: field slot 12 is beyond ptepack's schema");
    CHECK_THROWS_WITH(pte::rewrite(p, pte::Rewrite{}), Contains("cannot rewrite"));
  }
  SECTION("a longer vtable whose extra slot is zero loses nothing") {
    std::string bytes = program_with_extra_field(false, 8);
    // Clear the extra slot in the root's vtable: the vtable stays longer than the schema.
    const auto* root = reinterpret_cast<const fb::Table*>(et::GetProgram(bytes.data()));
    const uint8_t* vtable = root->GetVTable();
    REQUIRE(fb::ReadScalar<fb::voffset_t>(vtable) == 4 + 2 * 9);
    store<uint16_t>(
        bytes,
        static_cast<size_t>(reinterpret_cast<const char*>(vtable) - bytes.data()) + 4 + 2 * 8, 0);
    const pte::Program p = read_bytes(dir, bytes, "zero.pte");
    CHECK(p.not_rewritable.empty());
    const pte::Program again =
        read_bytes(dir, file_of(pte::rewrite(p, pte::Rewrite{})), "again.pte");
    CHECK(again.plans == std::vector<std::string>{"forward"});
    CHECK(again.not_rewritable.empty());
  }
}
