// ddprun output: each rank's stdout/stderr to the console ([rank N] prefix), log file and tail; [ddprun] lines.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace ddp {

class RankOutput {
 public:
  // console_streams / file_streams: bit mask of kStdout (1) and kStderr (2). file_path "" = no file.
  RankOutput(int64_t rank, int console_streams, int file_streams, const std::string& file_path);
  ~RankOutput();
  RankOutput(const RankOutput&) = delete;
  RankOutput& operator=(const RankOutput&) = delete;

  // Bytes read from the worker's stdout (stream 1) or stderr (stream 2); complete lines are routed at once.
  void feed(int stream, const char* data, size_t size);
  // Routes what is left of unterminated lines (call after the worker's pipes are drained).
  void finish();
  // The last lines the worker wrote (both streams, without prefixes), oldest first.
  std::vector<std::string> last_lines() const;

  static constexpr size_t kTailLines = 20;

 private:
  void route(int stream, const std::string& piece);
  void remember(const std::string& piece);

  std::string prefix_;  // "" for rank 0
  int console_streams_;
  int file_streams_;
  int file_fd_ = -1;
  std::string partial_[3];
  std::deque<std::string> tail_;
  std::string tail_partial_;
  bool tail_redraw_ = false;  // the last piece ended with '\r'
};

// Writes all of `text` to fd, retrying short writes; errors (a closed console) are ignored.
void write_fully(int fd, const std::string& text);

// Writes "[ddprun] <message>" on stderr.
void launcher_log(const std::string& message);

}  // namespace ddp
