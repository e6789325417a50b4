// libFuzzer target: the .ptg program reader (verifier, encoding checks) and what runs on its
// result.
#include <cstddef>
#include <cstdint>

#include "program_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ptepack::ProgramBuffer program;
  try {
    program = ptepack::read_program_buffer(std::vector<uint8_t>(data, data + size), "fuzz.ptg");
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
    return 0;
  }
  ptepack::fuzz::check_accepted_program(std::move(program));
  return 0;
}
