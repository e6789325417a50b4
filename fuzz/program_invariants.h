// What must hold for every program the readers accept: the graph checks run cleanly, and the
// writer's bytes (binary and JSON) read back as the same program.
#pragma once

#include <string>

#include "fuzz_support.h"
#include "ptepack/formats/program.h"
#include "ptepack/transforms/program_keys.h"
#include "ptepack/transforms/validate.h"

namespace ptepack::fuzz {

inline void check_accepted_program(const nb::ProgramT& program) {
  try {
    for (const auto& method : program.methods) {
      (void)validate_method_structure(*method, "fuzz");
      (void)method_name_problem(method->name);
    }
    (void)analyze_program_keys(program);
  } catch (const Error& e) {
    expect_input_error(e);
  }

  // pack writes what it read: those bytes must read back, and writing is deterministic.
  const std::string bytes = write_program_binary(program);
  ProgramPtr again;
  try {
    again = read_program_binary({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
                                "fuzz:rewritten");
  } catch (const Error& e) {
    invariant_failed(std::string("rewritten program does not read back: ") + e.what());
  }
  if (write_program_binary(*again) != bytes) invariant_failed("program round trip changed bytes");

  // dump --json --graph prints this JSON; it must be printable and read back as a program.
  std::string json;
  try {
    json = program_to_json(program);
  } catch (const Error& e) {
    invariant_failed(std::string("accepted program cannot be printed as JSON: ") + e.what());
  }
  try {
    (void)read_program_json(json, "fuzz:printed");
  } catch (const Error& e) {
    invariant_failed(std::string("printed JSON of an accepted program does not read back: ") +
                     e.what());
  }
}

}  // namespace ptepack::fuzz
