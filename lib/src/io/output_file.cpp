// Temp-beside-target outputs, positioned writes and the interrupt cleanup watcher.
#include "ptepack/io/output_file.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "ptepack/base/error.h"
#include "ptepack/io/progress.h"

namespace ptepack {
namespace {

// Temporaries alive right now; the signal watcher removes them. The mutex
// also orders an interrupt against the final rename: the watcher either runs
// before it (and the rename never happens) or after it (the command finished,
// and the watcher lets it exit normally).
std::mutex g_temps_mutex;
bool g_committing = false;   // guarded by g_temps_mutex
bool g_interrupted = false;  // guarded by g_temps_mutex
std::set<std::filesystem::path>& live_temps() {
  static std::set<std::filesystem::path> temps;
  return temps;
}

void register_temp(const std::filesystem::path& path) {
  std::lock_guard lock(g_temps_mutex);
  live_temps().insert(path);
}

void unregister_temp(const std::filesystem::path& path) {
  std::lock_guard lock(g_temps_mutex);
  live_temps().erase(path);
}

std::string errno_text() { return std::strerror(errno); }

void remove_quietly(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::filesystem::path make_temp_name(const std::filesystem::path& target) {
  static std::atomic<unsigned> counter{0};
  auto dir = target.parent_path();
  auto stem = target.filename().string();
  return dir / fmt::format(".{}.ptepack-tmp-{}-{}", stem, ::getpid(), counter++);
}

}  // namespace

OutputFile::OutputFile(const std::filesystem::path& path, std::string display_name)
    : display_name_(std::move(display_name)) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(ErrorCode::io, "{}: cannot create: {}", display_name_, errno_text());
}

OutputFile::OutputFile(int fd, std::string display_name)
    : display_name_(std::move(display_name)), fd_(fd) {
  if (fd_ < 0) fail(ErrorCode::io, "{}: cannot create: {}", display_name_, errno_text());
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write_at(uint64_t offset, std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n =
        ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(ErrorCode::io, "{}: write failed at offset {}: {}", display_name_, offset + done,
           errno_text());
    }
    done += static_cast<size_t>(n);
  }
}

void OutputFile::write_at(uint64_t offset, std::string_view bytes) {
  write_at(offset,
           std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

void OutputFile::start_writeback(uint64_t offset, uint64_t count) const noexcept {
  ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(count),
                    SYNC_FILE_RANGE_WRITE);
}

void OutputFile::sync_data() const {
  if (::fdatasync(fd_) != 0) {
    fail(ErrorCode::io, "{}: fsync failed: {}", display_name_, errno_text());
  }
}

void OutputFile::finish(uint64_t final_size, Durability durability) {
  if (::ftruncate(fd_, static_cast<off_t>(final_size)) != 0) {
    fail(ErrorCode::io, "{}: cannot set size: {}", display_name_, errno_text());
  }
  if (durability == Durability::now && ::fsync(fd_) != 0)
    fail(ErrorCode::io, "{}: fsync failed: {}", display_name_, errno_text());
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(ErrorCode::io, "{}: close failed: {}", display_name_, errno_text());
}

AtomicOutput::AtomicOutput(std::filesystem::path target, Kind kind)
    : target_(std::move(target)), kind_(kind) {
  if (target_.filename().empty()) target_ = target_.parent_path();
  if (target_.parent_path().empty()) target_ = std::filesystem::path(".") / target_;
  // Missing parent directories are made, as save_pretrained makes them; they stay if the
  // write then fails (they held nothing before).
  std::error_code ec;
  std::filesystem::create_directories(target_.parent_path(), ec);
  if (ec) {
    fail(ErrorCode::io, "{}: cannot create its parent directory: {}", target_.string(),
         ec.message());
  }
  remove_stale_temporaries(target_);
  temp_ = make_temp_name(target_);
  if (kind_ == Kind::file) {
    auto dir = target_.parent_path();
    anonymous_fd_ = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (anonymous_fd_ >= 0) return;  // nothing named to clean up until commit()
  }
  register_temp(temp_);
  if (kind_ == Kind::directory) {
    if (::mkdir(temp_.c_str(), 0755) != 0) {
      unregister_temp(temp_);
      fail(ErrorCode::io, "{}: cannot create temporary directory beside it: {}", target_.string(),
           errno_text());
    }
    sync_fd_ = ::open(temp_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sync_fd_ < 0) {
      const auto error = errno_text();
      remove_quietly(temp_);
      unregister_temp(temp_);
      fail(ErrorCode::io, "{}: cannot open its temporary directory: {}", target_.string(), error);
    }
  }
}

AtomicOutput::~AtomicOutput() {
  if (anonymous_fd_ >= 0) ::close(anonymous_fd_);
  if (sync_fd_ >= 0) ::close(sync_fd_);
  if (!committed_) remove_quietly(temp_);
  unregister_temp(temp_);
}

OutputFile AtomicOutput::file() {
  if (anonymous_fd_ >= 0) return OutputFile(::dup(anonymous_fd_), target_.string());
  return OutputFile(temp_, target_.string());
}

namespace {

// Whether syncfs on `fd`'s file system reports the write-back errors of the
// files written since `fd` was opened: Linux 5.8 and later, on a local file
// system (network and FUSE file systems may not flush to their server).
bool syncfs_reports_errors(int fd) {
  struct utsname name {};
  if (::uname(&name) != 0) return false;
  unsigned major = 0;
  unsigned minor = 0;
  if (std::sscanf(name.release, "%u.%u", &major, &minor) != 2) return false;
  if (major < 5 || (major == 5 && minor < 8)) return false;
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return false;
  constexpr long kRemote[] = {0x6969 /* NFS */,      0x65735546 /* FUSE */, 0x517B /* SMB */,
                              0xFF534D42 /* CIFS */, 0xFE534D42 /* SMB2 */, 0x00C36400 /* Ceph */,
                              0x01021997 /* 9P */,   0x5346414F /* AFS */,  0x47504653 /* GPFS */};
  for (long type : kRemote) {
    if (static_cast<long>(fs.f_type) == type) return false;
  }
  return true;
}

}  // namespace

void AtomicOutput::flush_directory() {
  // Every file of the output, and the directory itself, on stable storage
  // before it becomes visible: one syncfs of the file system instead of an
  // fsync per file (hundreds of small shards). It reports any write-back error
  // on that file system since sync_fd_ was opened, with the temporary
  // directory. Where it cannot be trusted to (an older kernel, a remote file
  // system), every file is fsynced instead.
  if (syncfs_reports_errors(sync_fd_)) {
    if (::syncfs(sync_fd_) != 0) {
      fail(ErrorCode::io, "{}: cannot flush the written files to stable storage: {}",
           target_.string(), errno_text());
    }
    return;
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(temp_, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const auto error = errno_text();
      if (fd >= 0) ::close(fd);
      fail(ErrorCode::io, "{}: fsync failed: {}", entry.path().string(), error);
    }
    ::close(fd);
  }
  if (ec) fail(ErrorCode::io, "{}: cannot list: {}", temp_.string(), ec.message());
  if (::fsync(sync_fd_) != 0) {
    fail(ErrorCode::io, "{}: fsync failed: {}", temp_.string(), errno_text());
  }
}

void AtomicOutput::commit() {
  // Outside the lock: an interrupt during the flush still cancels the output.
  if (kind_ == Kind::directory) flush_directory();
  std::unique_lock lock(g_temps_mutex);
  if (g_interrupted) {  // the watcher is removing the temporary and ending the process
    lock.unlock();
    wait_if_interrupted();
    lock.lock();
  }
  g_committing = true;
  // A failed rename leaves the temporary in place: interrupts must clean it up again.
  struct Reset {
    const bool& done;
    ~Reset() {
      if (!done) g_committing = false;
    }
  } reset{committed_};
  auto dir = target_.parent_path();
  if (anonymous_fd_ >= 0) {
    // Give the finished file a name beside the target, then rename it over the
    // target: an existing output is replaced in one step, as for named temporaries.
    live_temps().insert(temp_);
    auto proc = fmt::format("/proc/self/fd/{}", anonymous_fd_);
    if (::linkat(anonymous_fd_, "", AT_FDCWD, temp_.c_str(), AT_EMPTY_PATH) != 0 &&
        ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, temp_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      live_temps().erase(temp_);
      fail(ErrorCode::io, "{}: cannot link the written file into place: {}", target_.string(),
           errno_text());
    }
  }
  if (kind_ == Kind::directory) {
    std::error_code ec;
    bool exists = std::filesystem::exists(std::filesystem::symlink_status(target_, ec));
    if (exists) {
      // Swap old and new in one step, then delete the old tree (now at temp_).
      if (::syscall(SYS_renameat2, AT_FDCWD, temp_.c_str(), AT_FDCWD, target_.c_str(),
                    RENAME_EXCHANGE) != 0) {
        fail(ErrorCode::io, "{}: cannot replace existing output: {}", target_.string(),
             errno_text());
      }
      sync_directory(dir);
      committed_ = true;
      remove_quietly(temp_);
      return;
    }
  }
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    fail(ErrorCode::io, "{}: cannot move output into place: {}", target_.string(), errno_text());
  }
  committed_ = true;
  sync_directory(dir);
}

namespace {

// The PID in `.NAME.ptepack-tmp-PID-N[.dead]`, when `entry` is one of target's temporaries.
std::optional<long> temp_owner(const std::string& entry, const std::string& target_name) {
  const std::string prefix = "." + target_name + ".ptepack-tmp-";
  if (entry.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t end = prefix.size();
  while (end < entry.size() && entry[end] >= '0' && entry[end] <= '9') ++end;
  if (end == prefix.size() || end >= entry.size() || entry[end] != '-') return std::nullopt;
  return std::stol(entry.substr(prefix.size(), end - prefix.size()));
}

bool process_gone(long pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

}  // namespace

std::vector<std::filesystem::path> stale_temporaries(const std::filesystem::path& target) {
  std::vector<std::filesystem::path> out;
  auto normal = target.lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  auto dir = normal.parent_path().empty() ? std::filesystem::path(".") : normal.parent_path();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    auto pid = temp_owner(entry.path().filename().string(), normal.filename().string());
    if (pid && *pid != ::getpid() && process_gone(*pid)) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void remove_stale_temporaries(const std::filesystem::path& target) {
  for (const auto& path : stale_temporaries(target)) remove_quietly(path);
}

void wait_if_interrupted() {
  std::unique_lock lock(g_temps_mutex);  // blocks while the watcher cleans up
  while (g_interrupted) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the watcher is about to _exit
    lock.lock();
  }
}

void sync_directory(const std::filesystem::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void install_interrupt_cleanup() {
  // At a file size limit, fail the write with EFBIG (an I/O error that cleans
  // up) instead of being killed with the temporary left behind.
  ::signal(SIGXFSZ, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    std::unique_lock lock(g_temps_mutex);
    // The output is already in place: let the command finish and exit normally.
    if (g_committing) return;
    g_interrupted = true;
    report_interrupt();
    for (const auto& path : live_temps()) {
      // Move the tree away first so writer threads cannot add files to it,
      // then remove it, retrying for files created just before the move.
      auto dead = path;
      dead += ".dead";
      std::error_code ec;
      std::filesystem::rename(path, dead, ec);
      const auto& victim = ec ? path : dead;
      for (int attempt = 0; attempt < 1000; ++attempt) {
        std::filesystem::remove_all(victim, ec);
        if (!std::filesystem::exists(std::filesystem::symlink_status(victim, ec))) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    ::_exit(128 + sig);
  }).detach();
}

}  // namespace ptepack
