// Element-type tables: one row per dtype, every format's spelling side by side.
#include "ptepack/model/dtype.h"

#include <array>

namespace ptepack {
namespace {

struct Row {
  DType dtype;
  std::string_view name;
  uint64_t size;
  std::string_view safetensors;
  uint8_t ptd;
};

constexpr std::array<Row, 13> kRows{{
    {DType::BYTE, "BYTE", 1, "U8", 0},
    {DType::CHAR, "CHAR", 1, "I8", 1},
    {DType::SHORT, "SHORT", 2, "I16", 2},
    {DType::INT, "INT", 4, "I32", 3},
    {DType::LONG, "LONG", 8, "I64", 4},
    {DType::HALF, "HALF", 2, "F16", 5},
    {DType::FLOAT, "FLOAT", 4, "F32", 6},
    {DType::DOUBLE, "DOUBLE", 8, "F64", 7},
    {DType::BOOL, "BOOL", 1, "BOOL", 11},
    {DType::BFLOAT16, "BFLOAT16", 2, "BF16", 15},
    {DType::UINT16, "UINT16", 2, "U16", 27},
    {DType::UINT32, "UINT32", 4, "U32", 28},
    {DType::UINT64, "UINT64", 8, "U64", 29},
}};

const Row& row(DType dtype) {
  for (const auto& r : kRows) {
    if (r.dtype == dtype) return r;
  }
  return kRows[0];  // unreachable: DType values only come from the table
}

}  // namespace

std::string_view dtype_name(DType dtype) { return row(dtype).name; }
uint64_t element_size(DType dtype) { return row(dtype).size; }
std::string_view safetensors_code(DType dtype) { return row(dtype).safetensors; }
uint8_t ptd_scalar_type(DType dtype) { return row(dtype).ptd; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& r : kRows) {
    if (r.name == name) return r.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_program_id(int id) {
  for (const auto& r : kRows) {
    if (static_cast<int>(r.dtype) == id) return r.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view code) {
  for (const auto& r : kRows) {
    if (r.safetensors == code) return r.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_ptd(int id) {
  for (const auto& r : kRows) {
    if (r.ptd == id) return r.dtype;
  }
  return std::nullopt;
}

}  // namespace ptepack
