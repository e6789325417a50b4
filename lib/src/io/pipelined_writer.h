// Positioned writes on a background thread, so reading and hashing overlap writing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "ptepack/io/output_file.h"

namespace ptepack {

// A fixed ring of buffers: the caller fills one (acquire), hands it over
// (submit), and a writer thread pwrites it and returns it to the ring. Memory is
// buffers * buffer_bytes, whatever the file size.
//
// With `flush_every` > 0, a third thread flushes the file to stable storage
// (OutputFile::sync_data) each time that many more bytes have been written, so
// the disk, and on a virtual machine the host beneath it, works through the
// file while it is still being produced and the final fsync has only the tail
// left. Its errors are the writer's: they fail acquire() and finish().
class PipelinedWriter {
 public:
  PipelinedWriter(OutputFile& out, size_t buffers, size_t buffer_bytes, uint64_t flush_every = 0);
  ~PipelinedWriter();
  PipelinedWriter(const PipelinedWriter&) = delete;
  PipelinedWriter& operator=(const PipelinedWriter&) = delete;

  // The next free buffer; blocks while all are in flight. Rethrows a write
  // error as soon as one happened.
  std::span<uint8_t> acquire();
  // Writes the first `size` bytes of the buffer last acquired at `offset`.
  void submit(uint64_t offset, size_t size);
  // Waits for every submitted write and for every flush that came due;
  // rethrows the first write or flush error.
  void finish();

 private:
  struct Job {
    size_t buffer;
    uint64_t offset;
    size_t size;
  };
  void run();
  void flush_loop();
  void fail_with(std::exception_ptr failure);  // keeps the first; mutex_ held
  void stop_threads();
  [[nodiscard]] bool flush_due() const;  // a flush is running or owed; mutex_ held

  OutputFile& out_;
  // Left uninitialised: the producer fills every byte it submits.
  std::vector<std::unique_ptr<uint8_t[]>> buffers_;
  size_t buffer_bytes_ = 0;
  std::deque<size_t> free_;
  std::deque<Job> jobs_;
  size_t current_ = 0;
  bool closing_ = false;
  uint64_t written_ = 0;  // bytes pwritten so far
  uint64_t flushed_ = 0;  // of those, written before the last flush started
  bool flushing_ = false;
  const uint64_t flush_every_;
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread thread_;
  std::thread flusher_;
};

}  // namespace ptepack
