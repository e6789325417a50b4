// Text that reaches a terminal: escaping of names from files, and line wrapping of dumps.
#include <catch2/catch.hpp>

#include "base/text_wrap.h"
#include "ptepack/base/error.h"
#include "base/format_util.h"

using namespace ptepack;

TEST_CASE("escaped keeps valid UTF-8 and shows everything else as \\xNN") {
  CHECK(escaped("layers.0.weight") == "layers.0.weight");
  CHECK(escaped("gewicht-\xc3\xa4-\xe2\x82\xac-\xf0\x9f\x98\x80") ==
        "gewicht-\xc3\xa4-\xe2\x82\xac-\xf0\x9f\x98\x80");  // ä € 😀 stay
  CHECK(escaped("a\nb\x1b[31m") == "a\\x0ab\\x1b[31m");    // C0 controls
  CHECK(escaped("del\x7f") == "del\\x7f");
  CHECK(escaped("progr\xf7m") == "progr\\xf7m");           // a lone invalid byte
  CHECK(escaped("\xc2\x9b" "2J") == "\\xc2\\x9b2J");        // C1 CSI, encoded
  CHECK(escaped("\xc0\xaf") == "\\xc0\\xaf");               // overlong '/'
  CHECK(escaped("\xed\xa0\x80") == "\\xed\\xa0\\x80");      // a surrogate
  CHECK(escaped("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  CHECK(escaped("\xe2\x82") == "\\xe2\\x82");               // cut short
  CHECK(is_utf8("\xc3\xa4"));
  CHECK_FALSE(is_utf8("\xc3"));
  CHECK_FALSE(is_utf8("\xc0\xaf"));
}

TEST_CASE("wrap_line breaks at word ends, keeps shapes whole, never exceeds the width") {
  using detail::wrap_line;
  CHECK(wrap_line("  short line", 40) == "  short line\n");
  CHECK(wrap_line("  output index_put FLOAT [1, 128, 16] BUFFER_MUTATION", 30) ==
        "  output index_put FLOAT\n"
        "      [1, 128, 16]\n"
        "      BUFFER_MUTATION\n");
  // A word longer than a line is broken where the line ends, nothing lost.
  CHECK(wrap_line("  abcdefghijklmnopqrstuvwxyz", 12) ==
        "  abcdefghij\n"
        "      klmnop\n"
        "      qrstuv\n"
        "      wxyz\n");
  // Multi-byte characters take one column each.
  CHECK(wrap_line("\xc3\xa4\xc3\xa4\xc3\xa4 \xc3\xa4\xc3\xa4", 5) == "\xc3\xa4\xc3\xa4\xc3\xa4\n  \xc3\xa4\xc3\xa4\n");
  CHECK(wrap_line("anything", 0) == "anything\n");
  CHECK(detail::columns_of("\xe2\x80\xa6x") == 2);
  // East Asian wide characters take two columns; combining marks none.
  CHECK(detail::columns_of("\xe6\x9d\x83\xe9\x87\x8d") == 4);  // 权重
  CHECK(detail::columns_of("e\xcc\x81") == 1);                   // e + combining acute
  CHECK(wrap_line("  \xe6\x9d\x83\xe9\x87\x8d\xe6\x9d\x83\xe9\x87\x8d", 6) ==
        "  \xe6\x9d\x83\xe9\x87\x8d\n   \xe6\x9d\x83\n   \xe9\x87\x8d\n");
}
