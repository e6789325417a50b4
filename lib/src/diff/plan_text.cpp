// The fields of an execution plan as diff prints them.
#include "diff/plan_text.h"

#include "diff/plan_align.h"
#include "ptepack/tensors/dtype.h"

namespace ptepack::detail {

namespace et = executorch_flatbuffer;

std::string kind_name(et::KernelTypes type) {
  const std::string_view name = et::EnumNameKernelTypes(type);
  return name.empty() ? fmt::format("tag {}", static_cast<int>(type)) : std::string(name);
}

std::string scalar_type_text(et::ScalarType type) {
  const auto dtype = dtype_from_ptd(static_cast<int>(type));
  return dtype ? std::string(dtype_name(*dtype))
               : fmt::format("scalar type {}", static_cast<int>(type));
}

std::string op_text(const et::ExecutionPlan& plan, int32_t index) {
  const auto* op = plan.operators()->Get(static_cast<uint32_t>(index));
  std::string text(op->name()->string_view());
  if (op->overload() == nullptr) return text + " (no overload field)";
  if (op->overload()->size() > 0) text += "." + op->overload()->str();
  return text;
}

std::string value_summary(const et::ExecutionPlan& plan, int32_t value) {
  if (value < 0 || static_cast<uint32_t>(value) >= count(plan.values())) return "none";
  const auto& v = *plan.values()->Get(static_cast<uint32_t>(value));
  const std::string kind = kind_name(v.val_type());
  switch (v.val_type()) {
    case et::KernelTypes::Int:
      return fmt::format("{} {}", kind, v.val_as_Int()->int_val());
    case et::KernelTypes::Bool:
      return fmt::format("{} {}", kind, v.val_as_Bool()->bool_val());
    case et::KernelTypes::Double:
      return fmt::format("{} {}", kind, v.val_as_Double()->double_val());
    case et::KernelTypes::String:
      return fmt::format("{} {}", kind, string_text(v.val_as_String()->string_val()));
    case et::KernelTypes::IntList:
      return fmt::format("{} {}", kind, list_text(v.val_as_IntList()->items()));
    case et::KernelTypes::DoubleList:
      return fmt::format("{} {}", kind, list_text(v.val_as_DoubleList()->items()));
    case et::KernelTypes::BoolList:
      return fmt::format("{} {}", kind, list_text(v.val_as_BoolList()->items()));
    case et::KernelTypes::TensorList:
      return fmt::format("{} {}", kind, list_text(v.val_as_TensorList()->items()));
    case et::KernelTypes::OptionalTensorList:
      return fmt::format("{} {}", kind, list_text(v.val_as_OptionalTensorList()->items()));
    case et::KernelTypes::Tensor: {
      const auto* t = v.val_as_Tensor();
      return fmt::format("{} {} {}", kind, scalar_type_text(t->scalar_type()),
                         list_text(t->sizes()));
    }
    default:
      return kind;
  }
}

}  // namespace ptepack::detail
