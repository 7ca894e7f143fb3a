// ShardStream: a local file, an HTTP body (UrlBody) or a pipe: command's output (posix_spawn of /bin/sh -c, its own
// process group), read through libarchive's raw format and filters when the shard is compressed.
#include "data/shard_stream.h"

#include "data/shard_patterns.h"
#include "data/shard_source.h"
#include "data/storage_error.h"
#include "data/tar_shard.h"

#include <archive.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

extern char** environ;

namespace ddp {

std::string index_source(const std::string& shard) {
  if (http_shard(shard)) {  // beside the path: a query (a token the server takes for any path) stays after it
    const size_t end = std::min(shard.find_first_of("?#"), shard.size());
    return shard.substr(0, end) + ".ddpidx" + shard.substr(end);
  }
  if (!pipe_shard(shard)) return shard + ".ddpidx";
  // The last blank-separated word that contains ".tar".
  size_t best = std::string::npos, best_end = 0;
  for (size_t i = 5; i < shard.size();) {
    while (i < shard.size() && std::isspace(static_cast<unsigned char>(shard[i]))) ++i;
    const size_t start = i;
    while (i < shard.size() && !std::isspace(static_cast<unsigned char>(shard[i]))) ++i;
    if (i > start && shard.substr(start, i - start).find(".tar") != std::string::npos) {
      best = start;
      best_end = i;
    }
  }
  if (best == std::string::npos)
    throw std::invalid_argument("shard " + shard +
                                ": no word of the command names a .tar shard, so its index (the same command with "
                                "that word followed by .ddpidx) cannot be found");
  return shard.substr(0, best_end) + ".ddpidx" + shard.substr(best_end);
}

ShardStream::ShardStream(const std::string& shard, bool compressed) : shard_(shard) {
  try {
    open(compressed);
  } catch (...) {  // the destructor does not run for a constructor that throws
    release();
    throw;
  }
}

void ShardStream::open(bool compressed) {
  const std::string& shard = shard_;
  if (pipe_shard(shard)) {
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0) fail(std::string("cannot make a pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, ends[1], 1);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    const std::string command = shard.substr(5);
    const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
    const int r = posix_spawn(&pid_, "/bin/sh", &actions, &attr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(ends[1]);
    fd_ = ends[0];
    if (r != 0) {
      pid_ = 0;
      fail(std::string("cannot start /bin/sh: ") + std::strerror(r));
    }
  } else if (http_shard(shard)) {
    body_ = std::make_unique<UrlBody>(shard);
    if (const std::string why = body_->failure(); !why.empty()) fail(why);
    fd_ = body_->fd();
  } else {
    fd_ = ::open(shard.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail(std::strerror(errno));
  }
  if (!compressed) return;
  archive_ = archive_read_new();
  if (!archive_) fail("libarchive cannot start a reader");
  support_shard_compression(archive_);
  archive_read_support_format_raw(archive_);
  struct archive_entry* entry = nullptr;
  if (archive_read_open_fd(archive_, fd_, 1 << 16) != ARCHIVE_OK ||
      archive_read_next_header(archive_, &entry) != ARCHIVE_OK) {
    const std::string why = "cannot decompress: " + archive_why(archive_, "unreadable") + source_failure();
    fail(why + command_status_soon());
  }
}

std::string ShardStream::command_status_soon() {
  if (pid_ <= 0) return "";
  ::close(fd_);  // a command still writing ends on a broken pipe
  fd_ = -1;
  for (int tries = 0; tries < 200; ++tries) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = 0;
      if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        return " (the command exited with status " + std::to_string(WEXITSTATUS(status)) + ")";
      if (WIFSIGNALED(status) && WTERMSIG(status) != SIGPIPE)
        return " (the command was killed by signal " + std::to_string(WTERMSIG(status)) + ")";
      return "";
    }
    if (r < 0 && errno != EINTR) return "";
    ::usleep(10000);
  }
  return "";  // still running after 2 s: release() stops it
}

void ShardStream::release() {
  if (archive_) archive_read_free(archive_);
  archive_ = nullptr;
  if (fd_ >= 0 && !body_) ::close(fd_);
  fd_ = -1;
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = 0;
}

ShardStream::~ShardStream() { release(); }

std::string ShardStream::ended() {
  if (body_) return body_->ended();
  if (pid_ <= 0) return "";
  // Past a compressed stream's end the command may still write (trailing bytes): read them, as a reader of the
  // whole output would, so that it can end.
  if (archive_ && fd_ >= 0) {
    char sink[1 << 14];
    for (;;) {
      const ssize_t got = ::read(fd_, sink, sizeof sink);
      if (got == 0 || (got < 0 && errno != EINTR)) break;
    }
  }
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  pid_ = 0;
  if (r < 0) return std::string("cannot wait for the command: ") + std::strerror(errno);
  if (WIFEXITED(status))
    return WEXITSTATUS(status) == 0 ? "" : "the command exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "the command was killed by signal " + std::to_string(WTERMSIG(status));
  return "the command ended abnormally";
}

std::string ShardStream::source_failure() const {
  const std::string why = body_ ? body_->failure() : "";
  return why.empty() ? "" : " (" + why + ")";
}

void ShardStream::fail(const std::string& what) { throw StorageError("shard " + shard_ + ": " + what); }

size_t ShardStream::read_some(char* out, size_t n) {
  if (archive_) {
    const la_ssize_t got = archive_read_data(archive_, out, n);
    if (got < 0)
      fail("cannot decompress at byte " + std::to_string(position_) + ": " + archive_why(archive_, "error") +
           source_failure());
    return static_cast<size_t>(got);
  }
  for (;;) {
    const ssize_t got = ::read(fd_, out, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) fail("cannot read at byte " + std::to_string(position_) + ": " + std::strerror(errno));
  }
}

void ShardStream::read(char* out, size_t n) {
  for (size_t done = 0; done < n;) {
    const size_t got = read_some(out + done, n - done);
    if (got == 0) {
      const std::string how = ended();
      fail((pipe_shard(shard_) ? "the command's output" : std::string("the shard")) + " ends at byte " +
           std::to_string(position_) + ", before byte " + std::to_string(position_ + static_cast<int64_t>(n - done)) +
           (how.empty() ? "" : " (" + how + ")"));
    }
    done += got;
    position_ += static_cast<int64_t>(got);
  }
}

void ShardStream::skip(int64_t n) {
  std::vector<char> sink(static_cast<size_t>(std::min<int64_t>(n, 1 << 16)));
  while (n > 0) {
    const size_t step = static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(sink.size())));
    read(sink.data(), step);
    n -= static_cast<int64_t>(step);
  }
}

void ShardStream::drain(std::string* out, size_t limit) {
  char chunk[1 << 14];
  while (const size_t got = read_some(chunk, sizeof chunk)) {
    position_ += static_cast<int64_t>(got);
    if (!out) continue;
    if (out->size() + got > limit) fail("longer than " + std::to_string(limit) + " bytes");
    out->append(chunk, got);
  }
  if (const std::string how = ended(); !how.empty()) fail(how + " after " + std::to_string(position_) + " bytes");
}

void ShardStream::finish() { drain(nullptr, 0); }

std::string ShardStream::rest(size_t limit) {
  std::string out;
  drain(&out, limit);
  return out;
}

std::string read_command(const std::string& source, const ShardFetch& fetch) {
  std::string out;
  retry_storage(fetch, [&] { out = ShardStream(source, /*compressed=*/false).rest(size_t{1} << 31); });
  return out;
}

}  // namespace ddp
