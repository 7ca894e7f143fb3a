// write_file_atomic: a file replaced whole or not at all (temporary file, fsync, rename, fsync of the folder).
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

void write_file_atomic(const std::string& path, const std::function<void(const ByteSink&)>& produce,
                       Producer producer) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
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
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": rename failed: " + std::strerror(err));
  }
  // The rename is durable once the folder is: a caller that goes on to delete older files (checkpoint retention) must
  // not do so on a rename the disk may still lose.
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

void write_file_atomic(const std::string& path, const std::vector<char>& bytes) {
  write_file_atomic(path, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
}

}  // namespace ddp
