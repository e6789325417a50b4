// Pieces of the one reader (artifact.cpp) that its directory front ends share.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ptepack {

// An input that carries its own data (a packed directory, a package) given @DATA: refused
// (usage), naming it.
void refuse_data(const std::string& name, const std::vector<std::filesystem::path>& data_paths);
// A data file given (@DATA) that is not there, or not a regular file (a FIFO would block the
// reader): refused (I/O), naming it, before any input is read.
void refuse_missing_data(const std::vector<std::filesystem::path>& data_paths);

}  // namespace ptepack
