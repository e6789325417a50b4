// Element types: the Program's ScalarType and its spellings in the other formats.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ptepack {

// Values are the Program (.ptg) ScalarType ids. The types only ExecuTorch's
// ScalarType has (quantised, bit-packed, FLOAT8) get ids above 100, which no
// .ptg may use; they reach ptepack through .ptd files and .pte programs.
enum class DType : uint8_t {
  BYTE = 0,
  CHAR = 1,
  SHORT = 2,
  INT = 3,
  LONG = 4,
  HALF = 5,
  FLOAT = 6,
  DOUBLE = 7,
  BOOL = 11,
  BFLOAT16 = 15,
  UINT16 = 16,
  UINT32 = 17,
  UINT64 = 18,
  QINT8 = 112,
  QUINT8 = 113,
  QINT32 = 114,
  QUINT4X2 = 116,
  QUINT2X4 = 117,
  BITS16 = 122,
  FLOAT8E5M2 = 123,
  FLOAT8E4M3FN = 124,
  FLOAT8E5M2FNUZ = 125,
  FLOAT8E4M3FNUZ = 126,
};

// Program ScalarType name ("FLOAT"), as the manifest and dump print it.
[[nodiscard]] std::string_view dtype_name(DType dtype);
[[nodiscard]] std::optional<DType> dtype_from_name(std::string_view name);
[[nodiscard]] std::optional<DType> dtype_from_program_id(int id);
[[nodiscard]] uint64_t element_size(DType dtype);

// safetensors dtype codes ("F32"); empty for types safetensors cannot name.
[[nodiscard]] std::string_view safetensors_code(DType dtype);
[[nodiscard]] std::optional<DType> dtype_from_safetensors(std::string_view code);

// ExecuTorch FlatTensor ScalarType ids: same names, different numbers for the
// unsigned types, so conversion goes by name.
[[nodiscard]] uint8_t ptd_scalar_type(DType dtype);
[[nodiscard]] std::optional<DType> dtype_from_ptd(int id);

}  // namespace ptepack
