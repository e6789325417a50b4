// Element types: the Program's ScalarType and its spellings in the other formats.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ptepack {

// Values are the Program (.ptg) ScalarType ids.
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
};

// Program ScalarType name ("FLOAT"), as the manifest and dump print it.
[[nodiscard]] std::string_view dtype_name(DType dtype);
[[nodiscard]] std::optional<DType> dtype_from_name(std::string_view name);
[[nodiscard]] std::optional<DType> dtype_from_program_id(int id);
[[nodiscard]] uint64_t element_size(DType dtype);

// safetensors dtype codes ("F32").
[[nodiscard]] std::string_view safetensors_code(DType dtype);
[[nodiscard]] std::optional<DType> dtype_from_safetensors(std::string_view code);

// ExecuTorch FlatTensor ScalarType ids: same names, different numbers for the
// unsigned types, so conversion goes by name.
[[nodiscard]] uint8_t ptd_scalar_type(DType dtype);
[[nodiscard]] std::optional<DType> dtype_from_ptd(int id);

}  // namespace ptepack
