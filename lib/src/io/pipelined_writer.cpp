// Background positioned writer with a bounded buffer ring and optional background flushes.
#include "io/pipelined_writer.h"

namespace ptepack {

PipelinedWriter::PipelinedWriter(OutputFile& out, size_t buffers, size_t buffer_bytes,
                                 uint64_t flush_every)
    : out_(out), buffer_bytes_(buffer_bytes), flush_every_(flush_every) {
  for (size_t i = 0; i < buffers; ++i) {
    buffers_.emplace_back(new uint8_t[buffer_bytes]);
    free_.push_back(i);
  }
  thread_ = std::thread([this] { run(); });
  if (flush_every_ > 0) {
    try {
      flusher_ = std::thread([this] { flush_loop(); });
    } catch (...) {
      stop_threads();  // the writer is running: join it before the error leaves
      throw;
    }
  }
}

PipelinedWriter::~PipelinedWriter() { stop_threads(); }

void PipelinedWriter::stop_threads() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (flusher_.joinable()) flusher_.join();
}

void PipelinedWriter::fail_with(std::exception_ptr failure) {
  if (!error_) error_ = std::move(failure);
}

std::span<uint8_t> PipelinedWriter::acquire() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !free_.empty() || error_; });
  if (error_) std::rethrow_exception(error_);
  current_ = free_.front();
  free_.pop_front();
  return {buffers_[current_].get(), buffer_bytes_};
}

void PipelinedWriter::submit(uint64_t offset, size_t size) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back({current_, offset, size});
  }
  changed_.notify_all();
}

void PipelinedWriter::finish() {
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] {
      return (jobs_.empty() && free_.size() == buffers_.size() && !flush_due()) || error_;
    });
  }
  // A flush error is reported once: the final fsync of the file would not
  // see it again, so the flusher is stopped and its error checked here.
  stop_threads();
  std::lock_guard lock(mutex_);
  if (error_) std::rethrow_exception(error_);
}

bool PipelinedWriter::flush_due() const {
  return flush_every_ > 0 && (flushing_ || written_ - flushed_ >= flush_every_);
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
        out_.write_at(job.offset, std::span<const uint8_t>(buffers_[job.buffer].get(), job.size));
        out_.start_writeback(job.offset, job.size);
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      if (failure) {
        fail_with(failure);
      } else {
        written_ += job.size;
      }
    }
    free_.push_back(job.buffer);
    changed_.notify_all();
  }
}

void PipelinedWriter::flush_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return closing_ || error_ || flush_due(); });
    if (closing_ || error_) return;
    flushed_ = written_;
    flushing_ = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      out_.sync_data();
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    flushing_ = false;
    if (failure) fail_with(failure);
    changed_.notify_all();  // wakes finish(), and acquire() on an error
  }
}

}  // namespace ptepack
