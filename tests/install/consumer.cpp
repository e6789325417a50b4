// Uses the installed library the way an export script's C++ host would: packs a program
// graph with its weights into a .ptn, verifies it, and reads one tensor's layout back.
#include <cstdio>
#include <filesystem>
#include <string>

#include <ptepack/ptepack.h>  // the public API, through its one header only

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer EXAMPLES_DIR OUT_DIR\n");
    return 2;
  }
  const std::filesystem::path examples = argv[1];
  const std::filesystem::path out = std::filesystem::path(argv[2]) / "model.ptn";
  try {
    ptepack::PackOptions options;
    options.inputs = {ptepack::parse_input_spec((examples / "prefill.json").string()),
                      ptepack::parse_input_spec((examples / "decode.json").string())};
    options.output = out;
    const auto summary = ptepack::pack(options);
    const auto report = ptepack::verify_artifact(out, {});
    const auto artifact = ptepack::load_artifact(out);
    std::printf("methods %zu, verify %s, tensors %zu\n", summary.methods.size(),
                report.ok() ? "ok" : "failed", artifact.data.size());
    return report.ok() && summary.methods.size() == 2 && !artifact.data.empty() ? 0 : 1;
  } catch (const ptepack::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
