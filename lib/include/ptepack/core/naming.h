// The naming rules both front ends share: `<method>/<key>` for a method's own
// data, `state/<key>` for state, and the record of a key that changed
// (docs/rename-rules.md).
#pragma once

#include <string>
#include <string_view>

namespace ptepack {

// The namespace every mutable key lives in.
inline constexpr std::string_view kStatePrefix = "state/";

// A key that changed on its way into the output: in `method`, `from` became `to`.
struct KeyRename {
  std::string method;
  std::string from;
  std::string to;
};

// The final name of data key `key` referenced by `method` (DESIGN rules 2-4):
// `state/K` for a mutable key, `<method>/K` otherwise, unchanged when already
// in that form.
[[nodiscard]] std::string final_key(const std::string& method, const std::string& key,
                                    bool is_mutable);
// "state/K" for K, or K itself when already in that form.
[[nodiscard]] std::string state_key(const std::string& key);

// Method names of either front end: non-empty, no '/' (keys are
// `<method>/<key>`), not the reserved "state". The problem, or an empty string.
[[nodiscard]] std::string method_name_problem(std::string_view name);

}  // namespace ptepack
