// SIZE values of pack's options (--max-shard-bytes): Hugging Face's spellings.
#include <cctype>
#include <map>

#include "base/checked.h"
#include "ptepack/base/error.h"
#include "ptepack/pack/pack.h"

namespace ptepack {

namespace {

constexpr const char* kSizeForms =
    "a number (decimals allowed) and an optional unit in any case: B; K, M, G, T (KB, MB, GB, "
    "TB: powers of 1000); KiB, MiB, GiB, TiB (powers of 1024); e.g. 1.5GiB, 5GB, '3 kb'";

[[noreturn]] void bad_size(const std::string& text, std::string_view why) {
  fail(ErrorCode::usage, "invalid size {}: {}; expected {}", quote(text), why, kSizeForms);
}

}  // namespace

// Hugging Face's max_shard_size spellings: K/M/G/T are powers of 1000, KiB.. powers of 1024.
uint64_t parse_size(const std::string& text) {
  std::string_view rest(text);
  auto trim = [](std::string_view& view) {
    while (!view.empty() && std::isspace(static_cast<unsigned char>(view.front())))
      view.remove_prefix(1);
    while (!view.empty() && std::isspace(static_cast<unsigned char>(view.back())))
      view.remove_suffix(1);
  };
  trim(rest);
  // value = whole + fraction / 10^fraction_digits, kept exact as integers.
  uint64_t whole = 0;
  uint64_t fraction = 0;
  uint64_t scale = 1;
  size_t digits = 0;
  size_t i = 0;
  for (; i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])); ++i, ++digits) {
    auto next = checked_mul(whole, 10);
    if (next) next = checked_add(*next, static_cast<uint64_t>(rest[i] - '0'));
    if (!next) bad_size(text, "too large");
    whole = *next;
  }
  if (i < rest.size() && rest[i] == '.') {
    for (++i; i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])); ++i, ++digits) {
      if (scale >= 1'000'000'000'000'000ULL) bad_size(text, "too many decimals");
      fraction = fraction * 10 + static_cast<uint64_t>(rest[i] - '0');
      scale *= 10;
    }
  }
  if (digits == 0) bad_size(text, "no number");
  std::string_view suffix = rest.substr(i);
  trim(suffix);
  std::string unit_name;
  for (char c : suffix) unit_name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::map<std::string, uint64_t, std::less<>> kUnits = {
      {"", 1},
      {"b", 1},
      {"k", 1000ULL},
      {"kb", 1000ULL},
      {"m", 1000ULL * 1000},
      {"mb", 1000ULL * 1000},
      {"g", 1000ULL * 1000 * 1000},
      {"gb", 1000ULL * 1000 * 1000},
      {"t", 1000ULL * 1000 * 1000 * 1000},
      {"tb", 1000ULL * 1000 * 1000 * 1000},
      {"kib", 1ULL << 10},
      {"mib", 1ULL << 20},
      {"gib", 1ULL << 30},
      {"tib", 1ULL << 40},
  };
  auto unit = kUnits.find(unit_name);
  if (unit == kUnits.end()) bad_size(text, fmt::format("unknown unit {}", quote(suffix)));
  auto whole_bytes = checked_mul(whole, unit->second);
  // fraction * unit / scale must be a whole number of bytes.
  auto fraction_units = checked_mul(fraction, unit->second);
  if (!whole_bytes || !fraction_units) bad_size(text, "too large");
  if (*fraction_units % scale != 0) bad_size(text, "not a whole number of bytes");
  auto bytes = checked_add(*whole_bytes, *fraction_units / scale);
  if (!bytes) bad_size(text, "too large");
  if (*bytes == 0) bad_size(text, "must be positive");
  return *bytes;
}

}  // namespace ptepack
