// Background positioned writer with a bounded buffer ring.
#include "ptepack/io/pipelined_writer.h"

namespace ptepack {

PipelinedWriter::PipelinedWriter(OutputFile& out, size_t buffers, size_t buffer_bytes) : out_(out) {
  for (size_t i = 0; i < buffers; ++i) {
    buffers_.emplace_back(buffer_bytes);
    free_.push_back(i);
  }
  thread_ = std::thread([this] { run(); });
}

PipelinedWriter::~PipelinedWriter() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::span<uint8_t> PipelinedWriter::acquire() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !free_.empty() || error_; });
  if (error_) std::rethrow_exception(error_);
  current_ = free_.front();
  free_.pop_front();
  return buffers_[current_];
}

void PipelinedWriter::submit(uint64_t offset, size_t size) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back({current_, offset, size});
  }
  changed_.notify_all();
}

void PipelinedWriter::finish() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock,
                [this] { return (jobs_.empty() && free_.size() == buffers_.size()) || error_; });
  if (error_) std::rethrow_exception(error_);
}

void PipelinedWriter::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return !jobs_.empty() || closing_; });
    if (jobs_.empty()) return;
    Job job = jobs_.front();
    jobs_.pop_front();
    if (!error_) {
      lock.unlock();
      std::exception_ptr failure;
      try {
        out_.write_at(job.offset, std::span<const uint8_t>(buffers_[job.buffer].data(), job.size));
        out_.start_writeback(job.offset, job.size);
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      if (failure && !error_) error_ = failure;
    }
    free_.push_back(job.buffer);
    changed_.notify_all();
  }
}

}  // namespace ptepack
