// direct_io: large files written and read past the page cache (O_DIRECT) on a local disk's filesystem.
#pragma once

#include <cstddef>
#include <functional>
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
class DirectWriter {
 public:
  explicit DirectWriter(int fd);
  ~DirectWriter();
  DirectWriter(const DirectWriter&) = delete;
  DirectWriter& operator=(const DirectWriter&) = delete;

  void write(const void* data, size_t size);
  // Writes what is staged; call once, after the last write() and before fsync.
  void finish();
  // 0, or the errno of the first write that failed.
  int error() const { return error_; }
  // Whether the writes go past the page cache (from the start where the filesystem takes it, until the last page).
  bool direct() const { return direct_; }

 private:
  void write_out(const char* data, size_t size);
  void drop_direct();

  int fd_;
  bool direct_ = false;
  int error_ = 0;
  char* staging_ = nullptr;
  size_t staged_ = 0;
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
