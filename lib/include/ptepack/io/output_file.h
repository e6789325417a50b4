// Output files: temp-beside-target creation, positioned writes, atomic commit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ptepack {

// A file being written. Writes are positioned so a header can be filled in
// after the data it describes. Errors (ENOSPC, EFBIG, ...) throw ErrorCode::io
// naming `display_name`.
class OutputFile {
 public:
  OutputFile(const std::filesystem::path& path, std::string display_name);
  // Adopts an open, writable descriptor (closed by finish() or the destructor).
  OutputFile(int fd, std::string display_name);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write_at(uint64_t offset, std::span<const uint8_t> bytes);
  void write_at(uint64_t offset, std::string_view bytes);
  // Asks the kernel to start writing [offset, offset + count) to disk now, so
  // the fsync in finish() waits only for the tail. Advisory: errors surface
  // at fsync.
  void start_writeback(uint64_t offset, uint64_t count) const noexcept;
  // Flushes what is written so far to stable storage (fdatasync), from any
  // thread while writes go on. Throws ErrorCode::io naming the file: an error
  // seen here is not reported again by a later fsync of the same file.
  void sync_data() const;
  // When a finished file reaches stable storage.
  enum class Durability {
    now,        // fsync before finish() returns
    at_commit,  // a file of a directory output: AtomicOutput::commit flushes the whole
                // output with one syncfs before it renames it into place
  };
  // Sets the final length, flushes to stable storage (or leaves that to the
  // output's commit) and closes.
  void finish(uint64_t final_size, Durability durability = Durability::now);

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] const std::string& display_name() const noexcept { return display_name_; }

 private:
  std::string display_name_;
  int fd_ = -1;
};

// The destination of one command's output. Everything is written under a
// temporary path beside the target (same directory, so the final rename is
// atomic); commit() swaps it into place. Until then, and on any error or
// SIGINT/SIGTERM, the temporary is removed and an existing target untouched.
class AtomicOutput {
 public:
  enum class Kind { file, directory };
  AtomicOutput(std::filesystem::path target, Kind kind);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  // The temporary directory to fill (Kind::directory).
  [[nodiscard]] const std::filesystem::path& temp_path() const noexcept { return temp_; }
  // The output file to write (Kind::file). Where the filesystem supports
  // O_TMPFILE it has no name until commit(), so even SIGKILL leaves nothing.
  [[nodiscard]] OutputFile file();
  [[nodiscard]] const std::filesystem::path& target() const noexcept { return target_; }
  // How messages name file `name` being written inside a directory output: the
  // output it becomes and the temporary it is written to now.
  [[nodiscard]] std::string display_name(const std::string& name) const {
    return (target_ / name).string() + " (writing " + (temp_ / name).string() + ")";
  }
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  Kind kind_;
  bool committed_ = false;
  // A directory output's files and the directory, to stable storage (commit).
  void flush_directory();

  int anonymous_fd_ = -1;  // O_TMPFILE file, linked into place by commit()
  // A directory output: its temporary directory, open from its creation so that
  // commit's syncfs reports every write-back error of the files written since.
  int sync_fd_ = -1;
};

// Removes temporaries that pack processes which no longer run left beside
// `target` (`.NAME.ptepack-tmp-PID-N`, e.g. after SIGKILL); those of live
// processes are never touched.
void remove_stale_temporaries(const std::filesystem::path& target);
// Temporaries beside `target` whose process no longer runs (for verify's notes).
[[nodiscard]] std::vector<std::filesystem::path> stale_temporaries(
    const std::filesystem::path& target);

// Blocks SIGINT/SIGTERM/SIGHUP in the calling thread (call first in main, before
// any thread starts) and starts a watcher that removes every live temporary
// output and exits with 128 + signal. A signal that arrives once the output
// has been renamed into place lets the command finish. Also ignores SIGXFSZ,
// so a file size limit is an ordinary write error.
void install_interrupt_cleanup();

// Call before reporting an error or returning from main: while an interrupt
// is being handled this never returns (the watcher exits with 128 + signal),
// so the exit code and output state are the interrupt's, not a side error's.
void wait_if_interrupted();

// fsyncs a directory so a rename inside it is durable.
void sync_directory(const std::filesystem::path& dir);

}  // namespace ptepack
