// direct_io: large files written and read past the page cache (O_DIRECT) on a local disk's filesystem.
#include "base/direct_io.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <vector>

namespace ddp {
namespace {

// O_DIRECT's alignment of memory, file offsets and lengths: a page covers every disk's logical block size.
constexpr size_t kDirectAlign = 4096;
constexpr size_t kStagingBytes = size_t{4} << 20;

// The staging buffers made so far that are not in use: never freed (their pages stay resident for the next save),
// never more than were in use at once.
class StagingShelf {
 public:
  char* take() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        char* buffer = free_.back();
        free_.pop_back();
        return buffer;
      }
    }
    void* p = std::aligned_alloc(kDirectAlign, kStagingBytes);
    if (!p) throw std::bad_alloc();
    return static_cast<char*>(p);
  }
  void give(char* buffer) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(buffer);
  }

 private:
  std::mutex mutex_;
  std::vector<char*> free_;
};

StagingShelf& staging_shelf() {
  static auto* shelf = new StagingShelf;  // outlives every thread that still gives a buffer back while the process ends
  return *shelf;
}

// One staging buffer, from the shelf and back to it.
class Staging {
 public:
  Staging() : buffer_(staging_shelf().take()) {}
  ~Staging() { staging_shelf().give(buffer_); }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  char* get() const { return buffer_; }

 private:
  char* buffer_;
};

bool set_direct(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, on ? flags | O_DIRECT : flags & ~O_DIRECT) == 0;
}

// write(2) of `size` bytes, adding what went out to `done`: 0, or the errno that stopped it.
int write_all(int fd, const char* data, size_t size, size_t& done) {
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

bool direct_io_suits(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case EXT4_SUPER_MAGIC:  // also ext2 and ext3
    case XFS_SUPER_MAGIC:
    case BTRFS_SUPER_MAGIC:
    case F2FS_SUPER_MAGIC:
      return true;
    default:
      return false;
  }
}

DirectWriter::DirectWriter(int fd) : fd_(fd) {
  direct_ = ::lseek(fd, 0, SEEK_CUR) == 0 && direct_io_suits(fd) && set_direct(fd, true);
}

DirectWriter::~DirectWriter() {
  if (staging_) staging_shelf().give(staging_);
  for (const Piece& piece : pieces_) staging_shelf().give(piece.buffer);
}

void DirectWriter::drop_direct() {
  set_direct(fd_, false);
  direct_ = false;
}

void DirectWriter::write_out(const char* data, size_t size) {
  size_t done = 0;
  int err = write_all(fd_, data, size, done);
  // A filesystem or device that refuses this alignment after all (or a write cut short, which leaves the next one
  // unaligned): the rest goes through the page cache.
  if (err == EINVAL && direct_) {
    drop_direct();
    err = write_all(fd_, data, size, done);
  }
  int none = 0;
  if (err != 0) error_.compare_exchange_strong(none, err);
}

void DirectWriter::write_piece(const Piece& piece) {
  if (error_ == 0 && !piece.last) write_out(piece.buffer, piece.size);
  if (error_ == 0 && piece.last) {
    // Whole pages past the cache; the last partial one (O_DIRECT takes whole blocks only) through it.
    const size_t whole = piece.size & ~(kDirectAlign - 1);
    if (whole > 0) write_out(piece.buffer, whole);
    if (direct_) drop_direct();
    if (error_ == 0 && piece.size > whole) write_out(piece.buffer + whole, piece.size - whole);
  }
  staging_shelf().give(piece.buffer);
}

void DirectWriter::hand_over_staging(bool last) {
  const Piece piece{staging_, staged_, last};
  staging_ = nullptr;
  staged_ = 0;
  if (!behind_) return write_piece(piece);
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return pieces_.size() < kBehindBuffers || closed_; });
  if (closed_) {
    staging_shelf().give(piece.buffer);
    return;
  }
  pieces_.push_back(piece);
  changed_.notify_all();
}

void DirectWriter::write(const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0 && error_ == 0) {
    if (!behind_ && !direct_) {
      write_out(bytes, size);
      return;
    }
    if (!staging_) staging_ = staging_shelf().take();
    const size_t n = std::min(size, kStagingBytes - staged_);
    std::memcpy(staging_ + staged_, bytes, n);
    staged_ += n;
    bytes += n;
    size -= n;
    if (staged_ == kStagingBytes) hand_over_staging(false);
  }
}

void DirectWriter::finish() {
  if (staging_) hand_over_staging(true);
  close();
}

void DirectWriter::write_behind() { behind_ = true; }

void DirectWriter::write_staged() {
  for (;;) {
    Piece piece{};
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return !pieces_.empty() || closed_; });
      if (pieces_.empty()) return;
      piece = pieces_.front();
      pieces_.pop_front();
      changed_.notify_all();
    }
    write_piece(piece);
  }
}

void DirectWriter::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  changed_.notify_all();
}

void read_file_chunks(const std::string& path, PageCache cache,
                      const std::function<void(const char* data, size_t size)>& take) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  bool direct = cache == PageCache::Bypass && direct_io_suits(fd) && set_direct(fd, true);
  Staging buffer;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.get(), kStagingBytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && direct) {  // refused alignment: read on through the page cache
      direct = false;
      set_direct(fd, false);
      continue;
    }
    if (n < 0) throw std::runtime_error(path + ": read error: " + std::strerror(errno));
    if (n == 0) return;
    take(buffer.get(), static_cast<size_t>(n));
  }
}

}  // namespace ddp
