// diff of .pte programs built here field by field: one change at a time in what the
// runtime computes with differs (compile specs, delegate blobs, scalars bit for bit,
// memory planning, devices), and what it does not (version, operator table order) is a note.
#include <catch2/catch.hpp>
#include <flatbuffers/flatbuffers.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <limits>

#include "ptepack/diff/diff.h"
#include "ptepack/schema/pte_program_generated.h"
#include "test_support.h"

namespace fb = flatbuffers;
namespace et = executorch_flatbuffer;
using namespace ptepack;

namespace {

// What a program built here varies; the defaults give the reference program.
struct Spec {
  uint32_t version = 0;
  std::vector<uint8_t> compile_spec = {1, 2, 3};
  std::vector<uint8_t> blob = std::vector<uint8_t>(64, 7);
  double scalar = 0.5;
  uint32_t memory_offset = 0;
  et::DeviceType device = et::DeviceType::CPU;
  bool swap_operators = false;  // the operator table in the other order
  std::string delegate_id = "XnnpackBackend";
};

// Method "forward": values [input tensor, output tensor, double], one chain
// calling an operator and the delegate; the blob inline in backend_delegate_data.
std::string program(const Spec& s) {
  fb::FlatBufferBuilder b;
  b.ForceDefaults(true);  // a scalar equal to its default is still stored (-0.0 included)
  auto tensor = [&](uint32_t offset) {
    const auto alloc = et::CreateAllocationDetails(b, 0, offset, 0);
    const auto extra = et::CreateExtraTensorInfo(b, 0, 0, et::TensorDataLocation::SEGMENT,
                                                 s.device, 0);
    return et::CreateTensor(b, et::ScalarType::FLOAT, 0, b.CreateVector(std::vector<int32_t>{4}),
                            b.CreateVector(std::vector<uint8_t>{0}), false, 0, alloc, 0,
                            et::TensorShapeDynamism::STATIC, extra);
  };
  std::vector<fb::Offset<et::EValue>> values{
      et::CreateEValue(b, et::KernelTypes::Tensor, tensor(0).Union()),
      et::CreateEValue(b, et::KernelTypes::Tensor, tensor(16 + s.memory_offset).Union()),
      et::CreateEValue(b, et::KernelTypes::Double, et::CreateDouble(b, s.scalar).Union())};
  std::vector<fb::Offset<et::Operator>> operators{
      et::CreateOperator(b, b.CreateString("aten::mul"), b.CreateString("out")),
      et::CreateOperator(b, b.CreateString("aten::add"), b.CreateString("out"))};
  int32_t add = 1;
  if (s.swap_operators) {
    std::swap(operators[0], operators[1]);
    add = 0;
  }
  std::vector<fb::Offset<et::Instruction>> instructions{
      et::CreateInstruction(
          b, et::InstructionArguments::KernelCall,
          et::CreateKernelCall(b, add, b.CreateVector(std::vector<int32_t>{0, 2, 1})).Union()),
      et::CreateInstruction(
          b, et::InstructionArguments::DelegateCall,
          et::CreateDelegateCall(b, 0, b.CreateVector(std::vector<int32_t>{0, 1})).Union())};
  const auto chain = et::CreateChain(b, b.CreateVector(std::vector<int32_t>{0}),
                                     b.CreateVector(std::vector<int32_t>{1}),
                                     b.CreateVector(instructions));
  const auto spec = et::CreateCompileSpec(b, b.CreateString("k"), b.CreateVector(s.compile_spec));
  const auto delegate = et::CreateBackendDelegate(
      b, b.CreateString(s.delegate_id),
      et::CreateBackendDelegateDataReference(b, et::DataLocation::INLINE, 0),
      b.CreateVector(std::vector<fb::Offset<et::CompileSpec>>{spec}));
  const auto plan = et::CreateExecutionPlan(
      b, b.CreateString("forward"), 0, b.CreateVector(values),
      b.CreateVector(std::vector<int32_t>{0}), b.CreateVector(std::vector<int32_t>{1}),
      b.CreateVector(std::vector<fb::Offset<et::Chain>>{chain}), b.CreateVector(operators),
      b.CreateVector(std::vector<fb::Offset<et::BackendDelegate>>{delegate}),
      b.CreateVector(std::vector<int64_t>{0, 64}));
  b.ForceVectorAlignment(s.blob.size(), 1, 16);
  const auto blob = b.CreateVector(s.blob);
  const auto inline_data = et::CreateBackendDelegateInlineData(b, blob);
  const auto root = et::CreateProgram(
      b, s.version, b.CreateVector(std::vector<fb::Offset<et::ExecutionPlan>>{plan}), 0,
      b.CreateVector(std::vector<fb::Offset<et::BackendDelegateInlineData>>{inline_data}));
  b.Finish(root, et::ProgramIdentifier());
  return {reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize()};
}

ArtifactDiff compare(const test::TempDir& dir, const Spec& a, const Spec& b) {
  auto write = [&](const std::string& name, const Spec& s) {
    std::ofstream out(dir / name, std::ios::binary);
    const auto bytes = program(s);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return dir / name;
  };
  return diff_artifacts({write("a.pte", a), {}}, {write("b.pte", b), {}}, 1);
}

std::vector<std::string> texts(const ArtifactDiff& d) {
  std::vector<std::string> out;
  for (const auto& x : d.differences) out.push_back(x.text);
  return out;
}

}  // namespace

TEST_CASE("diff: a program built here equals itself") {
  test::TempDir dir;
  const auto d = compare(dir, {}, {});
  CHECK(d.equivalent());
  CHECK(d.differences.empty());
  CHECK(d.notes.empty());
}

TEST_CASE("diff: each change a computation could show differs, named") {
  test::TempDir dir;
  struct Case {
    const char* what;
    std::function<void(Spec&)> change;
    std::string expected;
  };
  const std::vector<Case> cases{
      {"a compile spec byte", [](Spec& s) { s.compile_spec[1] = 9; },
       "delegate 0 XnnpackBackend: compile spec 0 'k' value changed (3 -> 3 B)"},
      {"a delegate blob byte", [](Spec& s) { s.blob[10] = 8; },
       "delegate 0 XnnpackBackend blob changed, 64 B"},
      {"the delegate id", [](Spec& s) { s.delegate_id = "VulkanBackend"; },
       "delegate 0: id 'XnnpackBackend' -> 'VulkanBackend'"},
      {"a double by its last bit", [](Spec& s) { s.scalar = std::nextafter(0.5, 1.0); },
       "value 2 Double: "},
      {"-0.0 against 0.0", [](Spec& s) { s.scalar = 0.0; }, "value 2 Double: 0.5 -> 0"},
      {"memory planning", [](Spec& s) { s.memory_offset = 32; },
       "value 1 FLOAT [4]: memory planning memory_id 0 offset 16 -> memory_id 0 offset 48"},
      {"the device", [](Spec& s) { s.device = et::DeviceType::CUDA; },
       "value 0 FLOAT [4]: device CPU:0 -> CUDA:0"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    Spec changed;
    c.change(changed);
    const auto d = compare(dir, {}, changed);
    CHECK_FALSE(d.equivalent());
    const auto found = texts(d);
    CHECK(std::any_of(found.begin(), found.end(), [&](const std::string& t) {
      return t.find(c.expected) != std::string::npos;
    }));
    REQUIRE(d.methods.size() == 1);
    CHECK(d.methods[0].method == "forward");
    CHECK(d.methods[0].change == Change::changed);
  }
  // Bit for bit: a NaN equals the same NaN, and -0.0 is not 0.0.
  Spec nan;
  nan.scalar = std::numeric_limits<double>::quiet_NaN();
  CHECK(compare(dir, nan, nan).equivalent());
  Spec negative_zero;
  negative_zero.scalar = -0.0;
  Spec zero;
  zero.scalar = 0.0;
  CHECK_FALSE(compare(dir, zero, negative_zero).equivalent());
}

TEST_CASE("diff: version and operator table order are notes, not differences") {
  test::TempDir dir;
  Spec other;
  other.version = 3;
  other.swap_operators = true;  // the instruction still calls aten::add.out
  const auto d = compare(dir, {}, other);
  CHECK(d.equivalent());
  REQUIRE(d.notes.size() == 1);
  CHECK(d.notes[0] == "b.pte: program version 0 -> 3");
}
