// The progress line: fits the width it is given, covers hashing and writing, ETA never backs up.
#include <catch2/catch.hpp>

#include "ptepack/io/progress.h"

using ptepack::Progress;

TEST_CASE("a progress line fits the terminal width, shorter forms first") {
  Progress p;
  p.set_hash_total(1000ULL << 20);
  p.add_hashed(250ULL << 20);
  auto wide = p.line(1.0, 200);
  CHECK(wide == "ptepack: 25%  hashed 250/1000 MiB, 250 MiB/s, ETA 3s");
  for (size_t width : {size_t{60}, size_t{40}, size_t{20}, size_t{10}, size_t{3}}) {
    auto text = p.line(1.0, width);
    INFO(width << ": " << text);
    CHECK(text.size() <= width);
    CHECK(!text.empty());
  }
  CHECK(p.line(1.0, 30) == "ptepack: 25% 250 MiB/s ETA 3s");
}

TEST_CASE("until the plan is known, writes count as large as the bytes to hash") {
  Progress p;
  p.set_hash_total(100ULL << 20);
  p.expect_writes();
  p.add_hashed(100ULL << 20);
  // Hashing done, writes unknown: estimated at 100 MiB more, so half the job is done.
  CHECK(p.line(1.0, 200) ==
        "ptepack: 50%  hashed 100/100 MiB, written 0/100 MiB, 100 MiB/s, ETA 1s");
  // The plan: only 20 MiB to write (dedup). The ETA comes down, never up.
  p.set_write_total(20ULL << 20);
  p.add_written(10ULL << 20);
  CHECK(p.line(2.0, 200) ==
        "ptepack: 91%  hashed 100/100 MiB, written 10/20 MiB, 55 MiB/s, ETA 0s");
  // A package written again from the start counts its writes from zero, and
  // its ETA may grow again (10 MiB/s over 20 MiB: 2 s, above the 0 s shown).
  p.restart_writes();
  CHECK(p.line(10.0, 200) ==
        "ptepack: 83%  hashed 100/100 MiB, written 0/20 MiB, 10 MiB/s, ETA 2s");
}

TEST_CASE("the ETA shown never increases") {
  Progress p;
  p.set_hash_total(1000ULL << 20);
  p.add_hashed(500ULL << 20);
  auto first = p.line(1.0, 200);  // 500 MiB/s, ETA 1s
  CHECK(first.find("ETA 1s") != std::string::npos);
  // The rate drops (a slow disk): the honest estimate would be 10 s, the line keeps 1 s.
  auto later = p.line(50.0, 200);
  CHECK(later.find("ETA 1s") != std::string::npos);
}
