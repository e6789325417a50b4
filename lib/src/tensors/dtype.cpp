// Element-type tables: one row per dtype, every format's spelling side by side.
#include "ptepack/tensors/dtype.h"

#include <array>

namespace ptepack {
namespace {

struct Row {
  DType dtype;
  std::string_view name;
  uint64_t size;
  std::string_view safetensors;
  uint8_t ptd;
  bool program = true;  // a .ptg ScalarType
};

constexpr std::array<Row, 23> kRows{{
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
    {DType::QINT8, "QINT8", 1, "", 12, false},
    {DType::QUINT8, "QUINT8", 1, "", 13, false},
    {DType::QINT32, "QINT32", 4, "", 14, false},
    {DType::QUINT4X2, "QUINT4X2", 1, "", 16, false},  // two 4-bit values per byte
    {DType::QUINT2X4, "QUINT2X4", 1, "", 17, false},  // four 2-bit values per byte
    {DType::BITS16, "BITS16", 2, "", 22, false},
    {DType::FLOAT8E5M2, "FLOAT8E5M2", 1, "", 23, false},
    {DType::FLOAT8E4M3FN, "FLOAT8E4M3FN", 1, "", 24, false},
    {DType::FLOAT8E5M2FNUZ, "FLOAT8E5M2FNUZ", 1, "", 25, false},
    {DType::FLOAT8E4M3FNUZ, "FLOAT8E4M3FNUZ", 1, "", 26, false},
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
    if (r.program && static_cast<int>(r.dtype) == id) return r.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view code) {
  for (const auto& r : kRows) {
    if (!r.safetensors.empty() && r.safetensors == code) return r.dtype;
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
