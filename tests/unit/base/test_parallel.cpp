// parallel_for: every index runs once, and the error reported is the lowest index's.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/parallel.h"

using namespace ptepack;

TEST_CASE("parallel_for runs every index once on any number of threads") {
  for (unsigned jobs : {1u, 2u, 7u}) {
    std::vector<std::atomic<int>> seen(1000);
    parallel_for(seen.size(), jobs, [&](size_t i) { ++seen[i]; });
    for (const auto& s : seen) CHECK(s == 1);
  }
}

TEST_CASE("parallel_for rethrows the lowest failing index's error, not the first in time") {
  // Index 3 fails late, index 5 at once: a single thread would stop at 3, so must the pool.
  for (int round = 0; round < 20; ++round) {
    std::string message;
    try {
      parallel_for(64, 4, [](size_t i) {
        if (i == 3) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          throw std::runtime_error("index 3");
        }
        if (i == 5) throw std::runtime_error("index 5");
      });
    } catch (const std::runtime_error& e) {
      message = e.what();
    }
    CHECK(message == "index 3");
  }
}
