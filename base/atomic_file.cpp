// write_file_atomic, AtomicFileSet: files replaced whole or not at all (temporary, fsync, rename, folder fsync).
#include "base/atomic_file.h"

#include "base/direct_io.h"
#include "base/thread_name.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace ddp {

namespace {

namespace fs = std::filesystem;

fs::path folder_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// PATH's bytes written whole to PATH.tmp-PID and synced (the folder made if missing); returns the temporary's name.
// Any failure removes the temporary and throws naming PATH.
std::string write_temporary(const std::string& path, const std::function<void(const ByteSink&)>& produce,
                            Producer producer) {
  std::error_code ec;
  fs::create_directories(folder_of(path), ec);
  std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(path + ": cannot create " + tmp + ": " + std::strerror(errno));
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": " + what + ": " + std::strerror(err));
  };
  // A failed write is remembered, not thrown: the producer may be PyTorch's zip writer, whose destructor writes
  // again while an exception unwinds (std::terminate, SIGABRT on a full disk). The rest of its bytes are dropped.
  DirectWriter writer(fd);
  const ByteSink sink = [&](const void* data, size_t size) { writer.write(data, size); };
  try {
    if (producer == Producer::ThisThread) {
      produce(sink);
      writer.finish();
    } else {
      writer.write_behind();
      std::future<void> produced = start_in_idle_time("ddp-serialise", [&] {
        try {
          produce(sink);
          writer.finish();
        } catch (...) {
          writer.close();
          throw;
        }
      });
      writer.write_staged();
      produced.get();  // the producer's exception, if any
    }
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (writer.error() != 0) fail("write failed", writer.error());
  if (::fsync(fd) != 0) fail("fsync failed", errno);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": close failed: " + std::strerror(err));
  }
  return tmp;
}

// The renames and removals in DIR are durable once the folder is: a caller that goes on to delete older files
// (checkpoint retention) must not do so on a rename the disk may still lose. PATH names the file in errors.
void sync_folder(const fs::path& dir, const std::string& path) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    throw std::runtime_error(path + ": cannot open its folder to make the rename durable: " + std::strerror(errno));
  if (::fsync(dfd) != 0 && errno != EINVAL) {  // EINVAL: a folder that cannot be synced (fsync(2))
    const int err = errno;
    ::close(dfd);
    throw std::runtime_error(path + ": fsync of its folder failed: " + std::strerror(err));
  }
  ::close(dfd);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(const ByteSink&)>& produce,
                       Producer producer) {
  AtomicFileSet file;
  file.write(path, produce, producer);
  file.commit();
}

AtomicFileSet::~AtomicFileSet() {
  for (const Staged& s : staged_) ::unlink(s.temporary.c_str());
}

void AtomicFileSet::write(const std::string& path, const std::function<void(const ByteSink&)>& produce,
                          Producer producer) {
  staged_.push_back({write_temporary(path, produce, producer), path});
}

void AtomicFileSet::write(const std::string& path, const std::vector<char>& bytes) {
  write(path, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
}

void AtomicFileSet::remove(const std::string& path) { removed_.push_back(path); }

bool AtomicFileSet::holds(const std::string& path) const {
  for (const Staged& s : staged_)
    if (s.path == path) return true;
  return false;
}

void AtomicFileSet::commit() {
  std::vector<std::pair<fs::path, std::string>> folders;  // each folder touched, with a file of it for errors
  const auto touched = [&](const std::string& path) {
    const fs::path dir = folder_of(path);
    for (const auto& f : folders)
      if (f.first == dir) return;
    folders.emplace_back(dir, path);
  };
  for (const std::string& path : removed_) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      throw std::runtime_error(path + ": cannot remove it: " + std::strerror(errno));
    touched(path);
  }
  removed_.clear();
  while (!staged_.empty()) {
    const Staged s = staged_.front();
    staged_.erase(staged_.begin());
    if (::rename(s.temporary.c_str(), s.path.c_str()) != 0) {
      const int err = errno;
      ::unlink(s.temporary.c_str());
      throw std::runtime_error(s.path + ": rename failed: " + std::strerror(err));
    }
    touched(s.path);
  }
  for (const auto& [dir, path] : folders) sync_folder(dir, path);
}

void write_file_atomic(const std::string& path, const std::vector<char>& bytes) {
  AtomicFileSet file;
  file.write(path, bytes);
  file.commit();
}

}  // namespace ddp
