// The transformation rules, one by one: names, mutability, checks, dedup inputs.
#include <catch2/catch.hpp>

#include "graph/program_walk.h"
#include "ptepack/base/error.h"
#include "ptepack/graph/merge.h"
#include "ptepack/verify/reader.h"
#include "test_support.h"

using namespace ptepack;

namespace {

MergeInput fixture_input(const std::string& stem) {
  auto a = load_artifact(test::data_path(stem + ".json"));
  return MergeInput{a.name, unpack_program(std::move(a.program)), std::move(a.data), std::nullopt};
}

std::vector<MergeInput> both() {
  std::vector<MergeInput> v;
  v.push_back(fixture_input("prefill"));
  v.push_back(fixture_input("decode"));
  return v;
}

nb::MethodT& method(MergeInput& in) { return *in.program->methods.at(0); }

nb::NamedTensorRefT& constant(MergeInput& in, const std::string& name) {
  for (auto& c : method(in).constants) {
    if (c->name == name) return *c;
  }
  FAIL("no constant " << name);
  throw std::logic_error("unreachable");
}

nb::GraphT& subgraph(nb::GraphT& graph, const std::string& name) {
  for (auto& node : graph.nodes) {
    for (auto& input : node->inputs) {
      if (input->arg->value.type == nb::ArgumentValue::GraphArg &&
          input->arg->value.AsGraphArg()->name == name) {
        return *input->arg->value.AsGraphArg()->graph;
      }
    }
  }
  FAIL("no subgraph " << name);
  throw std::logic_error("unreachable");
}

nb::NodeT& node(nb::GraphT& graph, const std::string& name) {
  for (auto& n : graph.nodes) {
    if (n->name == name) return *n;
  }
  FAIL("no node " << name);
  throw std::logic_error("unreachable");
}

void require_error(std::vector<MergeInput> inputs, ErrorCode code,
                   const std::vector<std::string>& mentions) {
  try {
    (void)merge_programs(std::move(inputs));
    FAIL("merge accepted the inputs");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    for (const auto& m : mentions) CHECK_THAT(e.what(), Catch::Contains(m));
  }
}

}  // namespace

TEST_CASE("final names: method namespace, state namespace, idempotence") {
  CHECK(final_key("prefill", "w", false) == "prefill/w");
  CHECK(final_key("prefill", "prefill/w", false) == "prefill/w");
  CHECK(final_key("prefill", "prefillx/w", false) == "prefill/prefillx/w");
  CHECK(final_key("prefill", "decode/w", false) == "prefill/decode/w");
  CHECK(final_key("prefill", "pos", true) == "state/pos");
  CHECK(final_key("prefill", "state/pos", true) == "state/pos");
  CHECK(final_key("prefill", "state/x", false) == "prefill/state/x");
  CHECK(state_key("kv") == "state/kv");
}

TEST_CASE("merging the fixtures applies every naming rule") {
  auto merged = merge_programs(both());
  REQUIRE(merged.program->methods.size() == 2);
  CHECK(merged.program->methods[0]->name == "prefill");
  CHECK(merged.state == std::set<std::string>{"state/kv_cache", "state/pos"});
  REQUIRE(merged.tensors.count("prefill/_lifted_tensor_constant0"));
  REQUIRE(merged.tensors.count("decode/_lifted_tensor_constant0"));
  CHECK(merged.tensors.at("prefill/_lifted_tensor_constant0").dtype == DType::FLOAT);
  CHECK(merged.tensors.at("decode/_lifted_tensor_constant0").dtype == DType::LONG);
  CHECK(merged.tensors.count("state/pos") == 1);
  CHECK(merged.tensors.count("state/kv_cache") == 0);  // no data: zero-initialised state
  CHECK(merged.tensors.size() == 11);
  CHECK(merged.dropped_keys == 0);
  for (const auto& m : merged.program->methods) {
    const std::string prefix = m->name + "/";
    for_each_data_key(*m, [&](const std::string& key, KeyRole role) {
      INFO(m->name << " " << key << " " << key_role_name(role));
      bool state = key.rfind("state/", 0) == 0;
      CHECK((state || key.rfind(prefix, 0) == 0));
      if (role == KeyRole::mutable_buffer || role == KeyRole::mutation_target) CHECK(state);
    });
    // Readers of state are renamed too: prefill's pos is read-only.
    for (const auto& c : m->constants) {
      if (c->name == "b_pos") CHECK(c->data_key == "state/pos");
    }
    CHECK(m->mutable_buffers.at(0)->fqn == "state/kv_cache");
    // Quantisation keys inside the cond subgraphs are namespaced.
    for (const char* branch : {"true_graph_0", "false_graph_0"}) {
      auto& sub = subgraph(*m->graph, branch);
      bool found = false;
      for (const auto& tv : sub.tensor_values) {
        if (!tv->meta->quant) continue;
        found = true;
        const auto* group = tv->meta->quant->scheme.AsAffineGroup();
        CHECK(group->scale_data_key == prefix + "layers.0.attention.wq.scales");
        CHECK(group->zero_point_data_key == prefix + "layers.0.attention.wq.zero_points");
      }
      CHECK(found);
    }
  }
}

TEST_CASE("renames: listed by default, only counted without list_renames") {
  auto listed = merge_programs(both());
  REQUIRE(!listed.renames.empty());
  CHECK(listed.renamed_keys == listed.renames.size());
  auto counted = merge_programs(both(), 1, false);
  CHECK(counted.renames.empty());
  CHECK(counted.renamed_keys == listed.renamed_keys);
  CHECK(counted.tensors.size() == listed.tensors.size());
}

TEST_CASE("one input's entry bound to two final keys gives both the same data") {
  // Both methods of one program read tok_embeddings.weight: the entry is
  // copied for the first final key and moved into the table for the second.
  auto program = load_artifact(test::data_path("two_methods.json"));
  auto tree = unpack_program(std::move(program.program));
  auto data = load_artifact(test::data_path("prefill.safetensors"));
  const auto source = data.data.at("tok_embeddings.weight");
  // The methods' lifted constants differ in dtype; decode's takes prefill's
  // layout, so prefill's data serves both.
  auto lifted = [&](size_t method) -> nb::NamedTensorRefT& {
    for (auto& c : tree->methods.at(method)->constants) {
      if (c->name == "c_lifted_tensor_constant0") return *c;
    }
    FAIL("no lifted constant");
    throw std::logic_error("unreachable");
  };
  lifted(1).meta->dtype = lifted(0).meta->dtype;
  lifted(1).meta->sizes.clear();
  for (const auto& dim : lifted(0).meta->sizes)
    lifted(1).meta->sizes.push_back(std::make_unique<nb::DimT>(*dim));
  std::vector<MergeInput> inputs;
  inputs.push_back(MergeInput{program.name, std::move(tree), std::move(data.data), std::nullopt});
  auto merged = merge_programs(std::move(inputs));
  for (const char* key : {"prefill/tok_embeddings.weight", "decode/tok_embeddings.weight"}) {
    INFO(key);
    REQUIRE(merged.tensors.count(key) == 1);
    const auto& t = merged.tensors.at(key);
    CHECK(t.bytes.file == source.bytes.file);
    CHECK(t.bytes.offset == source.bytes.offset);
    CHECK(t.bytes.size == source.bytes.size);
    CHECK(t.shape == source.shape);
    CHECK(t.dtype == source.dtype);
  }
}

TEST_CASE("merging an already merged program renames nothing") {
  auto merged = merge_programs(both());
  std::vector<MergeInput> again;
  again.push_back(MergeInput{"packed", std::move(merged.program), merged.tensors, std::nullopt});
  auto twice = merge_programs(std::move(again));
  CHECK(twice.renames.empty());
  CHECK(twice.renamed_keys == 0);
  CHECK(twice.tensors.size() == 11);
}

TEST_CASE("rejections name the method and keys") {
  SECTION("two keys with one final name") {
    auto inputs = both();
    auto copy =
        std::make_unique<nb::NamedTensorRefT>(constant(inputs[0], "p_tok_embeddings_weight"));
    copy->name = "p_dup";
    copy->data_key = "prefill/tok_embeddings.weight";
    method(inputs[0]).constants.push_back(std::move(copy));
    inputs[0].data.emplace("prefill/tok_embeddings.weight",
                           inputs[0].data.at("tok_embeddings.weight"));
    require_error(std::move(inputs), ErrorCode::conflict,
                  {"'prefill'", "'tok_embeddings.weight'", "'prefill/tok_embeddings.weight'"});
  }
  SECTION("two keys with one final name: both written as given, first seen first") {
    // The prefixed key first, then the one the rename prefixes; and the state
    // form: each message quotes the keys as the input wrote them.
    for (bool prefixed_first : {false, true}) {
      auto inputs = both();
      auto copy =
          std::make_unique<nb::NamedTensorRefT>(constant(inputs[0], "p_tok_embeddings_weight"));
      copy->name = "p_dup";
      copy->data_key = "prefill/tok_embeddings.weight";
      auto& constants = method(inputs[0]).constants;
      if (prefixed_first) {
        constants.insert(constants.begin(), std::move(copy));
      } else {
        constants.push_back(std::move(copy));
      }
      inputs[0].data.emplace("prefill/tok_embeddings.weight",
                             inputs[0].data.at("tok_embeddings.weight"));
      std::string first =
          prefixed_first ? "'prefill/tok_embeddings.weight'" : "'tok_embeddings.weight'";
      std::string second =
          prefixed_first ? "'tok_embeddings.weight'" : "'prefill/tok_embeddings.weight'";
      require_error(std::move(inputs), ErrorCode::conflict,
                    {"method 'prefill': keys " + first + " and " + second +
                     " both become 'prefill/tok_embeddings.weight'"});
    }
    auto inputs = both();
    auto copy = std::make_unique<nb::NamedTensorRefT>(constant(inputs[1], "b_pos"));
    copy->name = "b_pos_again";
    copy->data_key = "state/pos";
    method(inputs[1]).constants.push_back(std::move(copy));
    require_error(std::move(inputs), ErrorCode::conflict,
                  {"method 'decode': keys 'pos' and 'state/pos' both become 'state/pos'"});
  }
  SECTION("state with different initial data") {
    auto inputs = both();
    auto& pos = inputs[1].data.at("pos");
    pos.bytes = inputs[1].data.at("tok_embeddings.weight").bytes;
    pos.bytes.size = 8;
    require_error(std::move(inputs), ErrorCode::conflict, {"'state/pos'", "initial data differs"});
  }
  SECTION("mutable buffer with different shape") {
    auto inputs = both();
    for (auto& tv : method(inputs[1]).graph->tensor_values) {
      if (tv->name == "b_kv_cache") tv->meta->sizes[1]->min = tv->meta->sizes[1]->max = 64;
    }
    require_error(std::move(inputs), ErrorCode::conflict,
                  {"'state/kv_cache'", "'prefill'", "'decode'"});
  }
  SECTION("mutable buffer with different dtype") {
    auto inputs = both();
    constant(inputs[1], "b_pos").meta->dtype = nb::ScalarType::INT;
    require_error(std::move(inputs), ErrorCode::conflict, {"'state/pos'"});
  }
  SECTION("referenced key without data") {
    auto inputs = both();
    inputs[1].data.erase("layers.0.attention.wq.scales");
    require_error(std::move(inputs), ErrorCode::invalid_input,
                  {"'decode'", "'layers.0.attention.wq.scales'", "no data"});
  }
  SECTION("constant dtype disagrees with data") {
    auto inputs = both();
    constant(inputs[0], "c_lifted_tensor_constant0").meta->dtype = nb::ScalarType::DOUBLE;
    require_error(std::move(inputs), ErrorCode::invalid_input,
                  {"'prefill'", "'_lifted_tensor_constant0'", "DOUBLE", "FLOAT"});
  }
  SECTION("constant static shape disagrees with data") {
    auto inputs = both();
    constant(inputs[1], "p_tok_embeddings_weight").meta->sizes[0]->min = 31;
    constant(inputs[1], "p_tok_embeddings_weight").meta->sizes[0]->max = 31;
    require_error(std::move(inputs), ErrorCode::invalid_input,
                  {"'decode'", "'tok_embeddings.weight'", "shape"});
  }
  SECTION("scale data with another dtype than declared") {
    auto inputs = both();
    constant(inputs[0], "p_wq_weight").meta->quant->scheme.AsAffineGroup()->scale_dtype =
        nb::ScalarType::HALF;
    require_error(std::move(inputs), ErrorCode::invalid_input,
                  {"'layers.0.attention.wq.scales'", "HALF"});
  }
  SECTION("state data from two inputs with the same path but different data") {
    auto inputs = both();
    inputs[1].name = inputs[0].name;  // e.g. `a=decode.json b=decode.json@other.safetensors`
    auto& pos = inputs[1].data.at("pos");
    pos.bytes = inputs[1].data.at("tok_embeddings.weight").bytes;
    pos.bytes.size = 8;
    require_error(std::move(inputs), ErrorCode::conflict, {"'state/pos'", "initial data differs"});
  }
  SECTION("a buffer mutation target that no buffer declares") {
    auto inputs = both();
    for (auto& spec : method(inputs[1]).output_specs) {
      if (spec->target == "pos") spec->target = "bogus";
    }
    require_error(std::move(inputs), ErrorCode::invalid_input,
                  {"'decode'", "'state/bogus'", "names no buffer"});
  }
  SECTION("mutable buffer data disagreeing with its declaration") {
    auto inputs = both();
    inputs[0].data.emplace("kv_cache",
                           inputs[0].data.at("pos"));  // LONG [1], declared FLOAT [1, 128, 16]
    require_error(std::move(inputs), ErrorCode::invalid_input,
                  {"'prefill'", "'b_kv_cache'", "'kv_cache'", "FLOAT"});
  }
  SECTION("duplicate method") {
    std::vector<MergeInput> inputs;
    inputs.push_back(fixture_input("prefill"));
    inputs.push_back(fixture_input("prefill"));
    require_error(std::move(inputs), ErrorCode::conflict, {"'prefill'", "already provided"});
  }
  SECTION("bad method names from the command line") {
    for (std::string name : {"", "a/b", "state"}) {
      auto inputs = both();
      inputs[0].rename_method = name;
      require_error(std::move(inputs), ErrorCode::usage, {"method name"});
    }
  }
  SECTION("METHOD= on a multi-method input") {
    auto a = load_artifact(test::data_path("two_methods.json"),
                           {test::data_path("prefill.safetensors")});
    std::vector<MergeInput> inputs;
    inputs.push_back(MergeInput{a.name, unpack_program(std::move(a.program)), std::move(a.data),
                                std::string("x")});
    require_error(std::move(inputs), ErrorCode::usage, {"2 methods"});
  }
}

TEST_CASE("quantised constants are checked for presence only") {
  auto inputs = both();
  // The fixture's packed int4 weight is declared [16, 16] BYTE but stored as U8 [16, 8].
  const auto& meta = *constant(inputs[0], "p_wq_weight").meta;
  REQUIRE(meta.sizes[1]->max == 16);
  REQUIRE(inputs[0].data.at("layers.0.attention.wq.weight").shape == Shape{16, 8});
  auto merged = merge_programs(std::move(inputs));
  CHECK(merged.tensors.at("prefill/layers.0.attention.wq.weight").shape == Shape{16, 8});
}

TEST_CASE("structural problems are reported, including inside subgraphs") {
  auto check_structure = [](auto mutate, const std::string& mention) {
    auto inputs = both();
    mutate(method(inputs[0]));
    require_error(std::move(inputs), ErrorCode::invalid_input, {"'prefill'", mention});
  };
  check_structure(
      [](nb::MethodT& m) {
        node(*m.graph, "gt").inputs[0]->arg->value.AsTensorArg()->name = "nope";
      },
      "unresolved name 'nope'");
  check_structure([](nb::MethodT& m) { node(*m.graph, "gt").outputs[0]->name = "embedding"; },
                  "duplicate SSA name 'embedding'");
  check_structure(
      [](nb::MethodT& m) {
        auto ghost = std::make_unique<nb::NodeT>();
        ghost->name = "ghost";
        ghost->op_kind = nb::OpKind::PLACEHOLDER;
        m.graph->nodes.insert(m.graph->nodes.begin(), std::move(ghost));
      },
      "placeholder 'ghost'");
  check_structure([](nb::MethodT& m) { std::swap(m.graph->nodes[7], m.graph->nodes[8]); },
                  "forward reference");
  check_structure(
      [](nb::MethodT& m) {
        node(*m.graph, "view").inputs[1]->arg->value.AsIntListArg()->refs.pop_back();
      },
      "IntListArg has 2 refs for 3 values");
  check_structure(
      [](nb::MethodT& m) {
        node(*m.graph, "index_put")
            .inputs[1]
            ->arg->value.AsOptionalTensorListArg()
            ->has_value.push_back(true);
      },
      "OptionalTensorListArg");
  check_structure(
      [](nb::MethodT& m) {
        node(subgraph(*m.graph, "false_graph_0"), "linear")
            .inputs[0]
            ->arg->value.AsTensorArg()
            ->name = "zz";
      },
      "subgraph 'false_graph_0'");
  check_structure(
      [](nb::MethodT& m) {
        std::swap(subgraph(*m.graph, "true_graph_0").nodes[2],
                  subgraph(*m.graph, "true_graph_0").nodes[3]);
      },
      "forward reference");
}

TEST_CASE("unreferenced input data is dropped and counted") {
  auto inputs = both();
  auto extra = inputs[0].data.at("tok_embeddings.weight");
  inputs[0].data.emplace("unused.weight", extra);
  auto merged = merge_programs(std::move(inputs));
  CHECK(merged.dropped_keys == 1);
  CHECK(merged.dropped_bytes == extra.bytes.size);
  CHECK(merged.tensors.count("prefill/unused.weight") == 0);
}
