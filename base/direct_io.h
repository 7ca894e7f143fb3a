// direct_io: large files written and read past the page cache (O_DIRECT) on a local disk's filesystem.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

namespace ddp {

// Whether files on the filesystem holding `fd` go past the page cache: ext4, XFS, btrfs and F2FS, where O_DIRECT
// is DMA between the disk and the caller's memory. Network and memory filesystems (NFS, Lustre, FUSE, tmpfs) keep
// ordinary writes: an uncached write there is a synchronous round trip per request, or no write at all.
bool direct_io_suits(int fd);

// Appends bytes to a file opened for writing (at offset 0): staged in 4 MiB page-aligned buffers and written with
// O_DIRECT where direct_io_suits, so a checkpoint neither takes fresh page-cache pages for its bytes nor pushes other
// files' pages (a dataset's) out; elsewhere, and for the last partial page, ordinary writes. The staging buffers
// are kept for the process's life and reused, so their pages stay resident between saves. A failed write is
// remembered, not thrown (see error()); the bytes after it are dropped.
//
// Written behind (write_behind()), write() and finish() only stage the bytes, on the thread that produces them, and
// the thread in write_staged() makes the writes, in order: the producer may then run at idle priority (its CPU work:
// copying the bytes in) while the system calls, which take the filesystem's locks and journal handles that the
// training threads' own file writes wait for, run at normal priority. At most kBehindBuffers staged buffers wait
// at once, so a producer faster than the disk waits for it.
class DirectWriter {
 public:
  static constexpr size_t kBehindBuffers = 4;

  explicit DirectWriter(int fd);
  ~DirectWriter();
  DirectWriter(const DirectWriter&) = delete;
  DirectWriter& operator=(const DirectWriter&) = delete;

  void write(const void* data, size_t size);
  // Writes what is staged; call once, after the last write() and before fsync (written behind: once
  // write_staged() has returned).
  void finish();
  // 0, or the errno of the first write that failed.
  int error() const { return error_.load(); }
  // Whether the writes go past the page cache (from the start where the filesystem takes it, until the last page).
  bool direct() const { return direct_; }

  // Before the first write(): the writes are made by write_staged() instead of by write() and finish().
  void write_behind();
  // Makes the staged writes, in order, until finish() or close() has been called and all that was staged is written.
  void write_staged();
  // The producer ends without finish() (it failed): write_staged() returns once what is staged is written.
  void close();

 private:
  struct Piece {
    char* buffer;
    size_t size;
    bool last;  // finish()'s: whole pages past the cache, the rest through it
  };
  // The staging buffer as a piece (`last`: finish()'s), written now or queued for write_staged(); none is staged after.
  void hand_over_staging(bool last);
  void write_piece(const Piece& piece);
  void write_out(const char* data, size_t size);
  void drop_direct();

  int fd_;
  bool direct_ = false;
  std::atomic<int> error_{0};
  char* staging_ = nullptr;
  size_t staged_ = 0;
  bool behind_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Piece> pieces_;
  bool closed_ = false;
};

// How a file is read: through the page cache (a file about to be used), or past it where direct_io_suits (a
// check of a file nothing will use next, such as a checkpoint about to be deleted: it reads what is on the disk and
// leaves the cache as it was).
enum class PageCache { Use, Bypass };

// Calls `take` with the bytes of the file at `path` in order, 4 MiB at a time. Throws naming the path if it cannot
// be opened or read.
void read_file_chunks(const std::string& path, PageCache cache,
                      const std::function<void(const char* data, size_t size)>& take);

}  // namespace ddp
