// .ptg / JSON program reading and writing through the generated FlatBuffers code.
#include "ptepack/formats/program.h"

#include <flatbuffers/idl.h>
#include <flatbuffers/minireflect.h>

#include <algorithm>
#include <fstream>

#include "ptepack/base/error.h"
#include "ptepack/io/input_file.h"
#include "ptepack/model/tensor.h"

namespace ptepack {
namespace detail {
extern const std::string_view kProgramSchemaText;
}

namespace {

// Each nested subgraph level costs ~6 tables of depth, so this allows
// Limits::max_graph_depth levels with headroom; the graph walk enforces the real limit.
constexpr flatbuffers::uoffset_t kVerifierMaxDepth = 512;
constexpr flatbuffers::uoffset_t kVerifierMaxTables = 50'000'000;

template <typename Enum>
bool enum_in_range(Enum value, std::initializer_list<int> allowed) {
  return std::find(allowed.begin(), allowed.end(), static_cast<int>(value)) != allowed.end();
}

// Rejects enum values and union tags outside the schema (the verifier lets them through).
class EnumChecker {
 public:
  explicit EnumChecker(const std::string& context) : context_(context) {}

  void check(const nb::ProgramT& program) {
    for (const auto& method : program.methods) {
      where_ = fmt::format("method {}", quote(method->name));
      check_graph(*method->graph, 0);
      for (const auto& c : method->constants) {
        check_meta(*c->meta, c->name);
        if (!enum_in_range(c->kind, {0, 1, 2, 3})) bad("constant", c->name, "kind", c->kind);
      }
      for (const auto& spec : method->output_specs) {
        if (!enum_in_range(spec->kind, {0, 1, 2})) bad("output spec", spec->name, "kind", spec->kind);
      }
    }
  }

 private:
  template <typename Enum>
  [[noreturn]] void bad(std::string_view what, std::string_view name, std::string_view field,
                        Enum value) {
    fail_input("{}: {}: {} {}: unknown {} value {}", context_, where_, what, quote(name), field,
               static_cast<int>(value));
  }

  void check_dtype(nb::ScalarType dtype, std::string_view name, std::string_view field) {
    if (!dtype_from_program_id(static_cast<int>(dtype))) bad("tensor", name, field, dtype);
  }

  void check_meta(const nb::TensorMetaT& meta, std::string_view name) {
    check_dtype(meta.dtype, name, "dtype");
    if (!meta.quant) return;
    const auto& scheme = meta.quant->scheme;
    if (scheme.type == nb::QuantScheme::AffineGroup) {
      check_dtype(scheme.AsAffineGroup()->scale_dtype, name, "scale_dtype");
      check_dtype(scheme.AsAffineGroup()->zero_point_dtype, name, "zero_point_dtype");
    } else if (scheme.type != nb::QuantScheme::PackedQuant || scheme.value == nullptr) {
      bad("tensor", name, "quant scheme", scheme.type);
    }
  }

  void check_graph(const nb::GraphT& graph, int depth) {
    if (depth > Limits::max_graph_depth) {
      fail_input("{}: {}: subgraphs nested deeper than {} levels", context_, where_,
                 Limits::max_graph_depth);
    }
    for (const auto& tv : graph.tensor_values) check_meta(*tv->meta, tv->name);
    for (const auto& node : graph.nodes) {
      if (!enum_in_range(node->op_kind, {0, 1, 2})) bad("node", node->name, "op_kind", node->op_kind);
      for (const auto& out : node->outputs) {
        if (!enum_in_range(out->kind, {0, 1, 2, 3, 4})) bad("output", out->name, "kind", out->kind);
      }
      for (const auto& input : node->inputs) {
        const auto& value = input->arg->value;
        auto tag = static_cast<int>(value.type);
        if (tag < 1 || tag > 13 || value.value == nullptr) {
          bad("node", node->name, "argument type", value.type);
        }
        if (value.type == nb::ArgumentValue::ScalarTypeArg) {
          check_dtype(value.AsScalarTypeArg()->value, node->name, "scalar type argument");
        }
        if (value.type == nb::ArgumentValue::GraphArg) {
          check_graph(*value.AsGraphArg()->graph, depth + 1);
        }
      }
    }
  }

  const std::string& context_;
  std::string where_;
};

}  // namespace

bool looks_like_program_binary(std::span<const uint8_t> head) {
  return head.size() >= 8 && std::equal(head.begin() + 4, head.begin() + 8, "NPTG");
}

ProgramPtr read_program_binary(std::span<const uint8_t> bytes, const std::string& context) {
  if (bytes.size() < 8) fail_input("{}: too short for a program ({} bytes)", context, bytes.size());
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE || bytes.size() > Limits::max_program_bytes) {
    fail_input("{}: program of {} bytes exceeds the limit", context, bytes.size());
  }
  if (!looks_like_program_binary(bytes)) {
    fail_input("{}: not a program graph (file identifier is not NPTG)", context);
  }
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), kVerifierMaxDepth, kVerifierMaxTables);
  if (!nb::VerifyProgramBuffer(verifier)) {
    fail_input("{}: program flatbuffer failed verification (corrupt or truncated)", context);
  }
  ProgramPtr program(nb::GetProgram(bytes.data())->UnPack());
  EnumChecker(context).check(*program);
  return program;
}

ProgramPtr read_program_json(std::string_view text, const std::string& context) {
  if (text.size() > Limits::max_program_bytes) {
    fail_input("{}: JSON program of {} bytes exceeds the limit", context, text.size());
  }
  flatbuffers::IDLOptions options;
  options.strict_json = false;
  flatbuffers::Parser parser(options);
  std::string schema(detail::kProgramSchemaText);
  if (!parser.Parse(schema.c_str())) {
    fail(ErrorCode::internal, "built-in program schema does not parse: {}", parser.error_);
  }
  // The parser needs a NUL-terminated buffer and must not see embedded NULs.
  std::string json(text);
  if (json.find('\0') != std::string::npos) fail_input("{}: JSON program contains a NUL byte", context);
  if (!parser.Parse(json.c_str())) {
    std::string message = parser.error_;
    std::replace(message.begin(), message.end(), '\n', ' ');
    fail_input("{}: invalid JSON program: {}", context, message);
  }
  std::span<const uint8_t> binary(parser.builder_.GetBufferPointer(), parser.builder_.GetSize());
  return read_program_binary(binary, context);
}

ProgramPtr read_program_file(const std::filesystem::path& path) {
  auto file = InputFile::open(path);
  if (file->size() > Limits::max_program_bytes) {
    fail_input("{}: program file of {} bytes exceeds the limit", file->name(), file->size());
  }
  auto bytes = file->read_range(0, file->size());
  if (looks_like_program_binary(bytes)) return read_program_binary(bytes, file->name());
  auto first = std::find_if(bytes.begin(), bytes.end(), [](uint8_t c) { return !std::isspace(c); });
  if (first != bytes.end() && *first == '{') {
    return read_program_json(
        std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), file->name());
  }
  fail_input("{}: neither a .ptg program (identifier NPTG) nor a JSON program", file->name());
}

std::string write_program_binary(const nb::ProgramT& program) {
  flatbuffers::FlatBufferBuilder builder(1024);
  builder.ForceDefaults(false);
  auto root = nb::Program::Pack(builder, &program);
  nb::FinishProgramBuffer(builder, root);
  return {reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize()};
}

std::string program_to_json(const nb::ProgramT& program) {
  auto binary = write_program_binary(program);
  flatbuffers::IDLOptions options;
  options.strict_json = true;
  options.indent_step = 1;
  flatbuffers::Parser parser(options);
  std::string schema(detail::kProgramSchemaText);
  if (!parser.Parse(schema.c_str())) {
    fail(ErrorCode::internal, "built-in program schema does not parse: {}", parser.error_);
  }
  std::string json;
  if (!flatbuffers::GenerateText(parser, binary.data(), &json)) {
    fail(ErrorCode::internal, "cannot render program as JSON");
  }
  return json;
}

}  // namespace ptepack
