// Positioned writes on a background thread, so reading and hashing overlap writing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "ptepack/io/output_file.h"

namespace ptepack {

// A fixed ring of buffers: the caller fills one (acquire), hands it over
// (submit), and a writer thread pwrites it and returns it to the ring. Memory is
// buffers * buffer_bytes, whatever the file size.
class PipelinedWriter {
 public:
  PipelinedWriter(OutputFile& out, size_t buffers, size_t buffer_bytes);
  ~PipelinedWriter();
  PipelinedWriter(const PipelinedWriter&) = delete;
  PipelinedWriter& operator=(const PipelinedWriter&) = delete;

  // The next free buffer; blocks while all are in flight. Rethrows a write
  // error as soon as one happened.
  std::span<uint8_t> acquire();
  // Writes the first `size` bytes of the buffer last acquired at `offset`.
  void submit(uint64_t offset, size_t size);
  // Waits for every submitted write; rethrows the first write error.
  void finish();

 private:
  struct Job {
    size_t buffer;
    uint64_t offset;
    size_t size;
  };
  void run();

  OutputFile& out_;
  std::vector<std::vector<uint8_t>> buffers_;
  std::deque<size_t> free_;
  std::deque<Job> jobs_;
  size_t current_ = 0;
  bool closing_ = false;
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread thread_;
};

}  // namespace ptepack
