// The memory-return hooks a host installs: pack brackets its method validation and its
// program encoding with them.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "ptepack/base/memory_return.h"
#include "ptepack/pack/pack.h"
#include "test_support.h"

namespace {

std::vector<std::string> calls;

}  // namespace

TEST_CASE("memory return: pack calls begin then end around validation and around encoding") {
  ptepack::set_memory_return_hooks(
      {[] { calls.emplace_back("begin"); }, [] { calls.emplace_back("end"); }});
  ptepack::test::TempDir dir;
  for (const char* output : {"model.ptn", "model_dir"}) {
    calls.clear();
    ptepack::PackOptions options;
    options.inputs = {ptepack::parse_input_spec(ptepack::test::data_path("prefill.json").string()),
                      ptepack::parse_input_spec(ptepack::test::data_path("decode.json").string())};
    options.output = dir / output;
    options.jobs = 1;
    (void)ptepack::pack(options);
    CHECK(calls == std::vector<std::string>{"begin", "end", "begin", "end"});
  }
  calls.clear();
  {
    ptepack::PromptMemoryReturn scope;  // a scope of its own
    CHECK(calls == std::vector<std::string>{"begin"});
  }
  CHECK(calls == std::vector<std::string>{"begin", "end"});
  calls.clear();
  {
    ptepack::PromptMemoryReturn outer;
    { ptepack::PromptMemoryReturn inner; }  // nested: only the outermost calls
    CHECK(calls == std::vector<std::string>{"begin"});
  }
  CHECK(calls == std::vector<std::string>{"begin", "end"});
  ptepack::set_memory_return_hooks({});  // no hooks: nothing is called
  calls.clear();
  { ptepack::PromptMemoryReturn scope; }
  CHECK(calls.empty());
}
