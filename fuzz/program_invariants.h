// What must hold for every program the readers accept: the graph checks run cleanly and agree
// on the flatbuffer and its object tree, and the writer's bytes (binary and JSON) read back as
// the same program.
#pragma once

#include <string>

#include "fuzz_support.h"
#include "ptepack/graph/program.h"
#include "graph/program_keys.h"
#include "graph/validate.h"

namespace ptepack::fuzz {

inline void check_accepted_program(ProgramBuffer buffer) {
  // dump and verify read the flatbuffer in place, pack its object tree: the
  // same checks must find the same problems in both.
  std::vector<std::vector<std::string>> in_place;
  try {
    for (const auto& method : access::methods(buffer.root())) {
      in_place.push_back(validate_method_structure(method, "fuzz"));
      (void)method_name_problem(access::name(method));
    }
    const ProgramKeys keys(buffer.root());
    for (const auto& use : keys.uses()) {
      if (keys.methods(use).empty()) invariant_failed("a referenced key names no method");
    }
  } catch (const Error& e) {
    expect_input_error(e);
  }
  const ProgramPtr tree = unpack_program(std::move(buffer));
  const nb::ProgramT& program = *tree;
  try {
    for (size_t m = 0; m < program.methods.size(); ++m) {
      auto problems = validate_method_structure(*program.methods[m], "fuzz");
      if (m < in_place.size() && problems != in_place[m])
        invariant_failed("the checks disagree on a flatbuffer and its object tree");
    }
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

  // The JSON form must be printable and read back as a program.
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
