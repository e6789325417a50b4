// Final key names: `<method>/<key>` and `state/<key>`.
#include "ptepack/core/naming.h"

#include <fmt/format.h>

#include "ptepack/base/error.h"

namespace ptepack {

std::string state_key(const std::string& key) {
  return key.starts_with(kStatePrefix) ? key : std::string(kStatePrefix) + key;
}

std::string final_key(const std::string& method, const std::string& key, bool is_mutable) {
  if (is_mutable) return state_key(key);
  if (key.size() > method.size() && key.compare(0, method.size(), method) == 0 &&
      key[method.size()] == '/') {
    return key;
  }
  return method + "/" + key;
}

std::string method_name_problem(std::string_view name) {
  if (name.empty()) return "method name is empty";
  if (name.find('/') != std::string_view::npos)
    return fmt::format("method name {} contains '/'", quote(name));
  if (name == "state") return "method name 'state' is reserved for state keys";
  return {};
}

}  // namespace ptepack
