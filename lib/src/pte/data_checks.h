// The .pte front end's part of verify: a program against the data files it loads with.
#pragma once

#include <string>
#include <vector>

#include "ptepack/pte/pte.h"
#include "ptepack/tensors/tensor.h"

namespace ptepack {

// A .pte program against the data files it is loaded with: every EXTERNAL
// tensor and every named-data key resolvable in exactly one of them (a key in
// two is a load error), EXTERNAL ones with the exact layout the runtime demands.
// `packed`: also what pack guarantees (no constant bytes or named data left).
struct DataFile {
  std::string name;
  const TensorTable* tensors = nullptr;
};
void check_program_data(const pte::Program& program, const std::string& context,
                        const std::vector<DataFile>& files,
                        const std::vector<std::string>& named_keys, bool packed,
                        std::vector<std::string>& problems);

// The shared-state layout (memory id 2, as ExecuTorch's share_mutable_buffers and
// pack --share-state write it): every named buffer at one offset and size in
// every method, different names never overlapping, and every method that plans
// id 2 sizing it alike and large enough for every buffer in it.
void check_shared_state(const pte::Program& program, const std::string& context,
                        std::vector<std::string>& problems);

}  // namespace ptepack
