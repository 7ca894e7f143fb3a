// ddprun output: line splitting, [rank N] prefixes, per-rank log files, the failure tail and [ddprun] lines.
#include "launcher/output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ddp {

void launcher_log(const std::string& message) { write_fully(STDERR_FILENO, "[ddprun] " + message + "\n"); }

void write_fully(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

RankOutput::RankOutput(int64_t rank, int console_streams, int file_streams, const std::string& file_path)
    : prefix_(rank == 0 ? "" : "[rank " + std::to_string(rank) + "] "),
      console_streams_(console_streams),
      file_streams_(file_path.empty() ? 0 : file_streams) {
  if (!file_path.empty()) {
    file_fd_ = open(file_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (file_fd_ < 0) throw std::runtime_error("cannot write " + file_path + ": " + std::strerror(errno));
  }
}

RankOutput::~RankOutput() {
  if (file_fd_ >= 0) close(file_fd_);
}

void RankOutput::feed(int stream, const char* data, size_t size) {
  std::string& partial = partial_[stream];
  for (size_t i = 0; i < size; ++i) {
    partial.push_back(data[i]);
    // '\r' ends a piece too, so progress bars redraw; very long lines are passed on in chunks.
    if (data[i] == '\n' || data[i] == '\r' || partial.size() >= 65536) {
      route(stream, partial);
      partial.clear();
    }
  }
}

void RankOutput::finish() {
  for (int stream : {1, 2}) {
    if (partial_[stream].empty()) continue;
    route(stream, partial_[stream] + "\n");
    partial_[stream].clear();
  }
}

void RankOutput::route(int stream, const std::string& piece) {
  remember(piece);
  if (file_fd_ >= 0 && (file_streams_ & stream)) write_fully(file_fd_, piece);
  if (!(console_streams_ & stream)) return;
  // ddptrain already prefixes its own error lines with [rank N]; do not say it twice.
  const bool prefixed = prefix_.empty() || piece.compare(0, prefix_.size(), prefix_) == 0;
  write_fully(stream == 1 ? STDOUT_FILENO : STDERR_FILENO, prefixed ? piece : prefix_ + piece);
}

void RankOutput::remember(const std::string& piece) {
  const char end = piece.empty() ? '\0' : piece.back();
  if (tail_redraw_ && piece != "\n") tail_partial_.clear();  // the text after '\r' replaces the line
  tail_redraw_ = end == '\r';
  tail_partial_ += (end == '\n' || end == '\r') ? piece.substr(0, piece.size() - 1) : piece;
  if (end != '\n') return;
  tail_.push_back(tail_partial_);
  tail_partial_.clear();
  while (tail_.size() > kTailLines) tail_.pop_front();
}

std::vector<std::string> RankOutput::last_lines() const {
  std::vector<std::string> lines(tail_.begin(), tail_.end());
  if (!tail_partial_.empty()) lines.push_back(tail_partial_);
  return lines;
}

}  // namespace ddp
