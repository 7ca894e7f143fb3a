// write_file_atomic, AtomicFileSet: files replaced whole or not at all, so a failed write never leaves a partial one.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace ddp {

// Atomic file write: PATH.tmp-PID, fsync, rename, fsync of the folder (made if missing).
void write_file_atomic(const std::string& path, const std::vector<char>& bytes);
// The same, with the bytes handed to the sink as `produce` makes them (nothing buffered); an exception from
// produce leaves no file behind.
using ByteSink = std::function<void(const void* data, size_t size)>;
// Where `produce` runs: on the calling thread, or on a thread of its own at idle priority
// (run_this_thread_in_idle_time) while the calling thread makes the file's system calls at its own
// (DirectWriter::write_behind): for a large file written in the background, whose bytes cost CPU to make, beside
// training threads that write files of their own.
enum class Producer { ThisThread, IdleThread };
void write_file_atomic(const std::string& path, const std::function<void(const ByteSink&)>& produce,
                       Producer producer = Producer::ThisThread);

// Files replaced together: each is written whole and synced to PATH.tmp-PID as it is added, and only commit()
// removes the paths named by remove() and renames the files into place in the order added, so a failed write leaves
// every file of the set as it was, and a failed rename the files added after it. The temporaries of a set that is
// not committed are removed with it.
class AtomicFileSet {
 public:
  AtomicFileSet() = default;
  AtomicFileSet(const AtomicFileSet&) = delete;
  AtomicFileSet& operator=(const AtomicFileSet&) = delete;
  ~AtomicFileSet();

  void write(const std::string& path, const std::function<void(const ByteSink&)>& produce,
             Producer producer = Producer::ThisThread);
  void write(const std::string& path, const std::vector<char>& bytes);
  // A file the set no longer has: removed at commit (no error when it does not exist).
  void remove(const std::string& path);
  // Whether write() added `path`.
  bool holds(const std::string& path) const;
  // Removes, renames, then syncs each folder touched; throws naming the file whose removal or rename failed.
  void commit();

 private:
  struct Staged {
    std::string temporary;
    std::string path;
  };
  std::vector<Staged> staged_;
  std::vector<std::string> removed_;
};

}  // namespace ddp
