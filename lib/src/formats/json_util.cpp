// Strict JSON parsing on top of nlohmann's parser callback.
#include "ptepack/formats/json_util.h"

#include <set>
#include <vector>

#include "ptepack/base/error.h"
#include "ptepack/model/tensor.h"

namespace ptepack {

nlohmann::json parse_json_strict(std::string_view text, const std::string& context) {
  using event_t = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> open_objects;
  // Depth is checked on the raw text first: nlohmann's parser recurses per level.
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > Limits::max_json_depth) {
        fail_input("{}: JSON nested deeper than {} levels", context, Limits::max_json_depth);
      }
    } else if (c == '}' || c == ']') --depth;
  }
  auto callback = [&](int, event_t event, nlohmann::json& parsed) {
    if (event == event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == event_t::key && !open_objects.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) {
        fail_input("{}: duplicate JSON key {}", context, quote(key));
      }
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, callback);
  } catch (const nlohmann::json::exception& e) {
    fail_input("{}: invalid JSON: {}", context, e.what());
  }
}

}  // namespace ptepack
