// libFuzzer target: the .ptg program reader (verifier, enum checks) and what runs on its result.
#include <cstddef>
#include <cstdint>

#include "program_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ptepack::ProgramPtr program;
  try {
    program = ptepack::read_program_binary({data, size}, "fuzz.ptg");
  } catch (const ptepack::Error& e) {
    ptepack::fuzz::expect_input_error(e);
    return 0;
  }
  ptepack::fuzz::check_accepted_program(*program);
  return 0;
}
