// Any ptepack artifact opened for reading: sniffed by content, tensors resolved.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/containers/manifest.h"
#include "ptepack/graph/program.h"
#include "ptepack/pte/pte.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack {

enum class ArtifactKind {
  package,            // .ptn ZIP (a program graph and its weights)
  graph_directory,    // packed directory of a program graph (or its manifest.json)
  graph,              // .ptg or JSON program graph, with optional data files
  ptd,                // FlatTensor data file
  safetensors,        // one safetensors file
  safetensors_index,  // *.safetensors.index.json
  pte,                // ExecuTorch program, with optional .ptd data files
  pte_directory,      // packed directory of .pte programs (manifest version 2)
};

[[nodiscard]] std::string_view artifact_kind_name(ArtifactKind kind);

// What `path` is: the one place that looks at an input to decide its kind (every command,
// pack's routing included, switches on this answer; docs/architecture.md). A directory or
// a manifest.json is a packed directory, of programs when its manifest says version 2
// (one that cannot be read counts as a program graph's: its reader says why); then, by
// content, a ZIP (.ptn package), a FlatTensor (.ptd) or an ExecuTorch program; by name,
// a safetensors index, a safetensors file or a `.pte`; anything else a program graph.
// Throws Error (io) when nothing is there.
[[nodiscard]] ArtifactKind identify(const std::filesystem::path& path);
// True when `path` is a packed directory by where it is (a directory, or a manifest.json that
// exists): one of identify()'s two directory kinds, decided without reading the manifest.
// Callers that treat both kinds alike ask this first and parse the manifest once, where
// they read it.
[[nodiscard]] bool names_a_directory(const std::filesystem::path& path);

struct Artifact {
  ArtifactKind kind = ArtifactKind::graph;
  std::string name;                       // as given, for messages
  std::filesystem::path root;             // the file, or the output directory
  ProgramBuffer program;                  // program graph artifacts; empty otherwise
  ProgramPtr program_tree;                // instead of `program`, loaded as ProgramForm::tree
  uint64_t program_file_bytes = 0;        // size of the program as stored (.ptg or JSON)
  std::vector<ProgramFile> pte_programs;  // pte and programs artifacts
  TensorTable data;  // every readable key; aliases point at their owner's bytes
  std::map<std::string, std::string> aliases;  // alias key -> owner key
  std::optional<Manifest> manifest;            // directory artifacts
  std::vector<std::string> data_files;         // data sources read (program artifacts)
  std::vector<std::string> notes;              // how the data files were found, when not given
  // What the reader's check against a manifest noted (files not hashed, a program checked
  // against its record, temporaries left behind): each line names its file.
  std::vector<std::string> checked;
};

// One INPUT argument: `[METHOD=]PATH[@DATA[,DATA...]]`, parsed once, where the
// command line is read; every command takes it parsed.
struct InputSpec {
  std::string text;  // the argument as given, for messages
  std::optional<std::string> method;
  std::filesystem::path path;
  std::vector<std::filesystem::path> data;
};

// Parses an INPUT argument of pack. A string naming an existing file or
// directory is always a plain PATH; otherwise `METHOD=` is split at the first
// '=' (when it comes before any '@'; the method name is validated later), and
// `@DATA` at the first '@' after that. Throws Error (usage) on an empty
// argument, PATH or DATA item.
[[nodiscard]] InputSpec parse_input_spec(const std::string& text);
// The argument of dump, verify and diff: `PATH[@DATA[,DATA...]]`, split like an
// INPUT but with no METHOD= (an '=' belongs to the path).
[[nodiscard]] InputSpec parse_artifact_spec(const std::string& text);

// How a program graph is kept: the checked flatbuffer, read in place (dump,
// verify, diff), or its object tree (pack, which renames in it), unpacked
// before any data file is read so the two are never held with the data.
enum class ProgramForm { buffer, tree };

// The data files a program is loaded with when none are given (PATH without @DATA),
// the one rule dump, verify, diff and pack share (default_data). A .pte program inside a
// packed directory whose manifest lists it loads the shards listed for it (and reads the
// named data listed for it); any other .pte program with EXTERNAL tensors, the same-stem
// .ptd beside it when there is one; a program graph, the same-stem .safetensors or
// .safetensors.index.json beside it when there is one.
struct DefaultData {
  std::vector<std::filesystem::path> files;
  std::optional<std::vector<std::string>> named_keys;  // from the manifest's record
  std::optional<std::string> note;                      // where they came from, when a manifest
  // A program the manifest beside it lists by name: what that manifest records
  // for it and for the shards listed for it (`shards` parallel to the entry's
  // list; null when the manifest lists no such shard), for a check of the bytes
  // against the record (verify DIR/prog.pte). Set even when the program's size
  // differs from the record (then `files` is empty: it is not the listed program).
  struct Record {
    std::filesystem::path manifest;
    ManifestProgramEntry program;
    std::vector<std::optional<ManifestShard>> shards;
  };
  std::optional<Record> record;
  // The manifest beside the program is ptepack's (its version is a number, and not a
  // program graph's) but cannot be read: why (every command refuses the program,
  // manifest_inconsistent: there is no record to check it against).
  std::optional<std::string> manifest_problem;
};
// `program`: the .pte program read from `path`; null for a program graph.
[[nodiscard]] DefaultData default_data(const std::filesystem::path& path,
                                       const pte::Program* program);

// Reads one data file (.safetensors, *.safetensors.index.json or .ptd) into a table.
[[nodiscard]] TensorTable load_data_file(const std::filesystem::path& path);

// The directory and manifest path for a directory artifact given as either.
struct DirectoryPaths {
  std::filesystem::path dir;
  std::filesystem::path manifest;
};
[[nodiscard]] DirectoryPaths directory_paths(const std::filesystem::path& path);

// Opens a file that must sit directly inside `dir` as a regular file (no symlink).
[[nodiscard]] InputFilePtr open_inside(const std::filesystem::path& dir, const std::string& name,
                                       const std::string& context);

}  // namespace ptepack
