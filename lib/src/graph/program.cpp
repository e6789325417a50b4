// .ptg / JSON program reading and writing through the generated FlatBuffers code.
#include "ptepack/graph/program.h"

#include <flatbuffers/idl.h>
#include <flatbuffers/minireflect.h>

#include <algorithm>
#include <fstream>
#include <mutex>

#include "graph/builder_memory.h"
#include "graph/program_json.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"
#include "graph/program_access.h"
#include "ptepack/io/input_file.h"
#include "ptepack/tensors/tensor.h"

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

// Bytes above 0x7f as \xNN, so a message about a bad string is itself valid UTF-8.
std::string shown_utf8(std::string_view text) {
  std::string out;
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    out += u < 0x80 ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return quote(out);
}

// Rejects what the verifier lets through: enum values and union tags outside the schema, a
// union tag without its member, subgraphs nested too deep, and strings that are not UTF-8
// (FlatBuffers strings are UTF-8; dump --json, manifests and every message that names them
// rely on it) or hold a NUL. Runs on the verified flatbuffer, before anything reads it.
class EncodingChecker {
 public:
  explicit EncodingChecker(const std::string& context) : context_(context) {}

  void check(const nb::Program& program) {
    where_ = "program";
    text("version", program.version());
    size_t m = 0;
    for (const nb::Method* method : *program.methods()) {
      where_ = fmt::format("methods[{}]", m++);
      text("method name", method->name());
      where_ = fmt::format("method {}", quote(access::text(method->name())));
      check_graph(*method->graph(), 0);
      for (const auto& c : access::tables(method->constants())) {
        text("constant", c.name());
        text("data key", c.data_key());
        check_meta(*c.meta(), c.name());
        if (!enum_in_range(c.kind(), {0, 1, 2, 3})) bad("constant", c.name(), "kind", c.kind());
      }
      for (const auto& spec : access::tables(method->output_specs())) {
        text("output spec", spec.name());
        text("output spec target", spec.target());
        if (!enum_in_range(spec.kind(), {0, 1, 2}))
          bad("output spec", spec.name(), "kind", spec.kind());
      }
      for (const auto& buffer : access::tables(method->mutable_buffers())) {
        text("mutable buffer", buffer.name());
        text("mutable buffer fqn", buffer.fqn());
      }
    }
  }

 private:
  using Strings = flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>;

  void text(std::string_view what, const flatbuffers::String* string) {
    const std::string_view value = access::text(string);
    if (!is_utf8(value)) {
      fail_input("{}: {}: {} {} is not valid UTF-8", context_, where_, what, shown_utf8(value));
    }
    // Names are looked up as C strings by runtimes: one with a NUL is unreachable.
    if (value.find('\0') != std::string_view::npos) {
      fail_input("{}: {}: {} {} contains a NUL byte", context_, where_, what, shown_utf8(value));
    }
  }

  void texts(std::string_view what, const Strings* values) {
    if (values == nullptr) return;
    for (const flatbuffers::String* value : *values) text(what, value);
  }

  // The strings an argument of any type holds (value names, refs, string constants).
  void check_argument_texts(const nb::Argument& arg) {
    switch (arg.value_type()) {
      case nb::ArgumentValue::TensorArg:
        text("tensor argument", arg.value_as_TensorArg()->name());
        break;
      case nb::ArgumentValue::IntArg:
        text("argument ref", arg.value_as_IntArg()->ref());
        break;
      case nb::ArgumentValue::FloatArg:
        text("argument ref", arg.value_as_FloatArg()->ref());
        break;
      case nb::ArgumentValue::BoolArg:
        text("argument ref", arg.value_as_BoolArg()->ref());
        break;
      case nb::ArgumentValue::StringArg:
        text("string argument", arg.value_as_StringArg()->value());
        break;
      case nb::ArgumentValue::IntListArg:
        texts("argument ref", arg.value_as_IntListArg()->refs());
        break;
      case nb::ArgumentValue::TensorListArg:
        texts("tensor list argument", arg.value_as_TensorListArg()->names());
        break;
      case nb::ArgumentValue::OptionalTensorListArg:
        texts("tensor list argument", arg.value_as_OptionalTensorListArg()->names());
        break;
      case nb::ArgumentValue::GraphArg:
        text("graph argument", arg.value_as_GraphArg()->name());
        break;
      default:
        break;
    }
  }

  template <typename Enum>
  [[noreturn]] void bad(std::string_view what, const flatbuffers::String* name,
                        std::string_view field, Enum value) {
    fail_input("{}: {}: {} {}: unknown {} value {}", context_, where_, what,
               quote(access::text(name)), field, static_cast<int>(value));
  }

  [[noreturn]] void missing(std::string_view what, const flatbuffers::String* name,
                            std::string_view field, std::string_view tag) {
    fail_input("{}: {}: {} {}: {} of type {} has no value", context_, where_, what,
               quote(access::text(name)), field, tag);
  }

  void check_dtype(nb::ScalarType dtype, const flatbuffers::String* name, std::string_view field) {
    if (!dtype_from_program_id(static_cast<int>(dtype))) bad("tensor", name, field, dtype);
  }

  void check_meta(const nb::TensorMeta& meta, const flatbuffers::String* name) {
    check_dtype(meta.dtype(), name, "dtype");
    const nb::QuantSpec* quant = meta.quant();
    if (quant == nullptr) return;
    if (const nb::AffineGroup* group = quant->scheme_as_AffineGroup(); group != nullptr) {
      text("scale data key", group->scale_data_key());
      text("zero point data key", group->zero_point_data_key());
      check_dtype(group->scale_dtype(), name, "scale_dtype");
      check_dtype(group->zero_point_dtype(), name, "zero_point_dtype");
    } else if (const nb::PackedQuant* packed = quant->scheme_as_PackedQuant(); packed != nullptr) {
      text("quant codec", packed->codec());
    } else if (quant->scheme_type() == nb::QuantScheme::NONE ||
               nb::EnumNameQuantScheme(quant->scheme_type())[0] == '\0') {
      bad("tensor", name, "quant scheme", quant->scheme_type());
    } else {
      // The verifier accepts a known tag whose member is absent.
      missing("tensor", name, "quant scheme", nb::EnumNameQuantScheme(quant->scheme_type()));
    }
  }

  void check_graph(const nb::Graph& graph, int depth) {
    if (depth > Limits::max_graph_depth) {
      fail_input("{}: {}: subgraphs nested deeper than {} levels", context_, where_,
                 Limits::max_graph_depth);
    }
    texts("graph input", graph.inputs());
    texts("graph output", graph.outputs());
    for (const auto& tv : access::tables(graph.tensor_values())) {
      text("tensor value", tv.name());
      check_meta(*tv.meta(), tv.name());
    }
    for (const auto& node : access::tables(graph.nodes())) {
      text("node", node.name());
      text("node target", node.target());
      for (const auto& kv : access::tables(node.metadata())) {
        text("node metadata key", kv.key());
        text("node metadata value", kv.value());
      }
      if (!enum_in_range(node.op_kind(), {0, 1, 2}))
        bad("node", node.name(), "op_kind", node.op_kind());
      for (const auto& out : access::tables(node.outputs())) {
        text("output", out.name());
        text("output alias", out.alias_of());
        texts("output name", out.names());
        if (!enum_in_range(out.kind(), {0, 1, 2, 3, 4}))
          bad("output", out.name(), "kind", out.kind());
      }
      for (const auto& input : access::tables(node.inputs())) {
        text("argument name", input.name());
        const nb::Argument& arg = *input.arg();
        auto tag = static_cast<int>(arg.value_type());
        if (tag < 1 || tag > 13) bad("node", node.name(), "argument type", arg.value_type());
        if (arg.value() == nullptr) {
          missing("node", node.name(), "argument", nb::EnumNameArgumentValue(arg.value_type()));
        }
        check_argument_texts(arg);
        if (const auto* scalar = arg.value_as_ScalarTypeArg(); scalar != nullptr) {
          check_dtype(scalar->value(), node.name(), "scalar type argument");
        }
        if (const auto* sub = arg.value_as_GraphArg(); sub != nullptr) {
          check_graph(*sub->graph(), depth + 1);
        }
      }
    }
  }

  const std::string& context_;
  std::string where_;
};

// FlatBuffers 2.0's verifier checks that a vector's length field is 4-byte aligned, not that
// 8-byte elements are 8-byte aligned, and reading a misaligned [long] or [double] is undefined
// behaviour. IntListArg.values and FloatListArg.values are the schema's only such vectors.
bool wide_lists_aligned(const nb::Graph* graph, const uint8_t* base) {
  if (graph == nullptr || graph->nodes() == nullptr) return true;
  for (const nb::Node* node : *graph->nodes()) {
    if (node->inputs() == nullptr) continue;
    for (const nb::NamedArgument* input : *node->inputs()) {
      const nb::Argument* arg = input->arg();
      if (arg == nullptr) continue;
      const uint8_t* data = nullptr;
      // Builders do not align empty vectors, and nothing is read from them.
      if (const auto* ints = arg->value_as_IntListArg(); ints != nullptr && ints->values()) {
        if (ints->values()->size() > 0) data = ints->values()->Data();
      } else if (const auto* floats = arg->value_as_FloatListArg();
                 floats != nullptr && floats->values()) {
        if (floats->values()->size() > 0) data = floats->values()->Data();
      } else if (const auto* sub = arg->value_as_GraphArg(); sub != nullptr) {
        if (!wide_lists_aligned(sub->graph(), base)) return false;
      }
      if (data != nullptr && (data - base) % 8 != 0) return false;
    }
  }
  return true;
}

}  // namespace

bool looks_like_program_binary(std::span<const uint8_t> head) {
  return head.size() >= 8 && std::equal(head.begin() + 4, head.begin() + 8, "NPTG");
}

namespace {

// Every check of ProgramBuffer on `bytes`; returns the root.
const nb::Program& check_program_bytes(std::span<const uint8_t> bytes, const std::string& context) {
  if (bytes.size() < 8) fail_input("{}: too short for a program ({} bytes)", context, bytes.size());
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE || bytes.size() > Limits::max_program_bytes) {
    fail_input("{}: program of {} bytes exceeds the limit", context, bytes.size());
  }
  if (!looks_like_program_binary(bytes)) {
    fail_input("{}: not a program graph (file identifier is not NPTG)", context);
  }
  // Builders pad the whole buffer to a multiple of its largest alignment (at least 4). The
  // verifier cannot see a cut that only removes trailing padding, this can.
  if (bytes.size() % sizeof(flatbuffers::uoffset_t) != 0) {
    fail_input(
        "{}: program of {} bytes is not a whole flatbuffer (size not a multiple of 4: "
        "truncated?)",
        context, bytes.size());
  }
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), kVerifierMaxDepth, kVerifierMaxTables);
  if (!nb::VerifyProgramBuffer(verifier)) {
    fail_input("{}: program flatbuffer failed verification (corrupt or truncated)", context);
  }
  const nb::Program* root = nb::GetProgram(bytes.data());
  for (const nb::Method* method : *root->methods()) {
    if (!wide_lists_aligned(method->graph(), bytes.data())) {
      fail_input("{}: program has a misaligned [long] or [double] list (corrupt)", context);
    }
  }
  EncodingChecker(context).check(*root);
  return *root;
}

ProgramPtr unpack_root(const nb::Program& root) {
  // One program is unpacked at a time in a process. An unpack holds the
  // flatbuffer and the growing object tree, the reader's largest moment;
  // two at once (pack reads its inputs on -j threads) made that pack's
  // peak memory. Parsing JSON text, the longer step, still runs in parallel.
  static std::mutex one_unpack;
  std::lock_guard lock(one_unpack);
  return ProgramPtr(root.UnPack());
}

std::string_view as_text(const std::vector<uint8_t>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

// Builds checked buffers from owned bytes.
class ProgramBufferAccess {
 public:
  template <typename Bytes>
  static ProgramBuffer make(Bytes bytes, const std::string& context) {
    ProgramBuffer buffer;
    const std::span<const uint8_t> view(bytes.data(), bytes.size());
    const nb::Program& root = check_program_bytes(view, context);
    buffer.storage_ = std::move(bytes);  // the heap block, so `root`, stays where it is
    buffer.root_ = &root;
    return buffer;
  }
  static void release(ProgramBuffer& buffer) {
    buffer.storage_ = std::vector<uint8_t>();
    buffer.root_ = nullptr;
  }
};

size_t ProgramBuffer::size() const {
  return std::visit([](const auto& bytes) { return static_cast<size_t>(bytes.size()); }, storage_);
}

ProgramBuffer read_program_buffer(std::vector<uint8_t> bytes, const std::string& context) {
  return ProgramBufferAccess::make(std::move(bytes), context);
}

ProgramBuffer read_program_json_buffer(std::string_view text, const std::string& context) {
  if (text.size() > Limits::max_program_bytes) {
    fail_input("{}: JSON program of {} bytes exceeds the limit", context, text.size());
  }
  return ProgramBufferAccess::make(program_json_to_binary(text, context), context);
}

ProgramBuffer read_program_file_buffer(const std::filesystem::path& path, uint64_t* file_bytes) {
  auto file = InputFile::open(path);
  if (file_bytes != nullptr) *file_bytes = file->size();
  if (file->size() > Limits::max_program_bytes) {
    fail_input("{}: program file of {} bytes exceeds the limit", file->name(), file->size());
  }
  auto bytes = file->read_range(0, file->size());
  if (looks_like_program_binary(bytes)) return read_program_buffer(std::move(bytes), file->name());
  auto first = std::find_if(bytes.begin(), bytes.end(), [](uint8_t c) { return !std::isspace(c); });
  if (first == bytes.end() || *first != '{') {
    fail_input("{}: neither a .ptg program (identifier NPTG) nor a JSON program", file->name());
  }
  auto binary = program_json_to_binary(as_text(bytes), file->name());
  // The text is not needed once the flatbuffer is built: free it (assigning {}
  // would keep its capacity).
  std::vector<uint8_t>().swap(bytes);
  return ProgramBufferAccess::make(std::move(binary), file->name());
}

ProgramPtr unpack_program(ProgramBuffer buffer) {
  if (!buffer) return nullptr;
  auto program = unpack_root(buffer.root());
  ProgramBufferAccess::release(buffer);
  return program;
}

ProgramPtr unpack_program_kept(const ProgramBuffer& buffer) {
  return buffer ? unpack_root(buffer.root()) : nullptr;
}

ProgramPtr read_program_binary(std::span<const uint8_t> bytes, const std::string& context) {
  return unpack_root(check_program_bytes(bytes, context));
}

ProgramPtr read_program_json(std::string_view text, const std::string& context) {
  return unpack_program(read_program_json_buffer(text, context));
}

ProgramPtr read_program_file(const std::filesystem::path& path, uint64_t* file_bytes) {
  return unpack_program(read_program_file_buffer(path, file_bytes));
}

namespace {

void encode_program(flatbuffers::FlatBufferBuilder& builder, const nb::ProgramT& program) {
  builder.ForceDefaults(false);
  auto root = nb::Program::Pack(builder, &program);
  nb::FinishProgramBuffer(builder, root);
}

// The generated CreateVector for a list of tables, each table freed once packed.
template <typename T, typename Create>
auto pack_freeing(flatbuffers::FlatBufferBuilder& builder, std::vector<std::unique_ptr<T>>& items,
                  Create create) {
  std::vector<decltype(create(builder, items.front().get()))> offsets(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    offsets[i] = create(builder, items[i].get());
    items[i].reset();
  }
  std::vector<std::unique_ptr<T>>().swap(items);
  return builder.CreateVector(offsets);
}

// nb::CreateGraph, CreateMethod and CreateProgram for objects, step for step (the same calls
// in the same order give the same bytes), freeing each node, value, constant and method once it
// is packed: the tree shrinks while the buffer grows.
flatbuffers::Offset<nb::Graph> pack_graph(flatbuffers::FlatBufferBuilder& builder,
                                          nb::GraphT& graph) {
  auto nodes = pack_freeing(builder, graph.nodes,
                            [](auto& b, const nb::NodeT* node) { return nb::CreateNode(b, node); });
  auto inputs = builder.CreateVectorOfStrings(graph.inputs);
  auto outputs = builder.CreateVectorOfStrings(graph.outputs);
  auto values = pack_freeing(
      builder, graph.tensor_values,
      [](auto& b, const nb::TensorValueT* value) { return nb::CreateTensorValue(b, value); });
  return nb::CreateGraph(builder, nodes, inputs, outputs, values);
}

flatbuffers::Offset<nb::Method> pack_method(flatbuffers::FlatBufferBuilder& builder,
                                            nb::MethodT& method) {
  auto name = builder.CreateString(method.name);
  auto graph = method.graph ? pack_graph(builder, *method.graph) : 0;
  method.graph.reset();
  auto constants = pack_freeing(
      builder, method.constants,
      [](auto& b, const nb::NamedTensorRefT* ref) { return nb::CreateNamedTensorRef(b, ref); });
  auto output_specs = pack_freeing(
      builder, method.output_specs,
      [](auto& b, const nb::OutputSpecT* spec) { return nb::CreateOutputSpec(b, spec); });
  auto buffers = pack_freeing(builder, method.mutable_buffers,
                              [](auto& b, const nb::MutableBufferSpecT* spec) {
                                return nb::CreateMutableBufferSpec(b, spec);
                              });
  return nb::CreateMethod(builder, name, graph, constants, output_specs, buffers);
}

std::string builder_bytes(const flatbuffers::FlatBufferBuilder& builder) {
  return {reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize()};
}

}  // namespace

std::string write_program_binary(const nb::ProgramT& program, size_t size_hint) {
  auto builder = detail::reserved_builder(size_hint);
  encode_program(builder, program);
  return builder_bytes(builder);
}

flatbuffers::DetachedBuffer write_program_buffer(ProgramPtr program, size_t size_hint) {
  auto builder = detail::reserved_builder(size_hint);
  builder.ForceDefaults(false);
  auto version = program->version.empty() ? 0 : builder.CreateString(program->version);
  auto methods = pack_freeing(builder, program->methods,
                              [](auto& b, nb::MethodT* method) { return pack_method(b, *method); });
  program.reset();
  nb::FinishProgramBuffer(builder, nb::CreateProgram(builder, version, methods));
  return builder.Release();
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
