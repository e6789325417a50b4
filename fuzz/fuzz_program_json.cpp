// libFuzzer target: the JSON program reader (streaming, against the built-in schema).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "program_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ptepack::ProgramBuffer program;
  try {
    program = ptepack::read_program_json_buffer(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
    return 0;
  }
  ptepack::fuzz::check_accepted_program(std::move(program));
  return 0;
}
