// The one speculation driver (speculate, speculation_holds): a plan that fails on predicted
// digests writes nothing and hashes nothing; a plan that holds keeps what was written, or
// raises what its writer raised; a plan that does not hold is dropped, its writer's error
// with it.
#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>
#include <thread>

#include "pack/pack_internal.h"
#include "ptepack/base/error.h"

using namespace ptepack;
using detail::speculate;
using detail::speculation_holds;

TEST_CASE("speculation: a plan that fails on predicted digests runs nothing else") {
  int written = 0;
  int hashed = 0;
  auto s = speculate<int>([]() -> int { fail_input("x: a cap the prediction broke"); },
                          [&](int&, const std::stop_token&) { ++written; }, [&] { ++hashed; });
  CHECK_FALSE(s.has_value());
  CHECK(written == 0);
  CHECK(hashed == 0);
}

TEST_CASE("speculation: the plan is written beside the hashing, and kept when it holds") {
  int hashed = 0;
  auto s = speculate<std::string>([] { return std::string("plan"); },
                                  [](std::string& plan, const std::stop_token&) { plan += "+w"; },
                                  [&] { ++hashed; });
  REQUIRE(s.has_value());
  CHECK(hashed == 1);
  CHECK(s->plan == "plan+w");
  CHECK(speculation_holds(*s, true));
  CHECK_FALSE(speculation_holds(*s, false));
}

TEST_CASE("speculation: the writer's error is raised when the plan holds, dropped otherwise") {
  auto s = speculate<int>(
      [] { return 1; },
      [](int&, const std::stop_token&) { throw Error(ErrorCode::io, "out: disk full"); }, [] {});
  REQUIRE(s.has_value());
  REQUIRE(s->write_error);
  CHECK_FALSE(speculation_holds(*s, false));  // written again: the error goes with it
  CHECK_THROWS_WITH(speculation_holds(*s, true), "out: disk full");
}

TEST_CASE("speculation: an error of the hashing stops the writer and is raised") {
  bool stopped = false;
  CHECK_THROWS_WITH(speculate<int>([] { return 1; },
                                   [&](int&, const std::stop_token& stop) {
                                     while (!stop.stop_requested()) std::this_thread::yield();
                                     stopped = true;
                                   },
                                   [] { throw Error(ErrorCode::invalid_input, "in: corrupt"); }),
                    "in: corrupt");
  CHECK(stopped);
}
