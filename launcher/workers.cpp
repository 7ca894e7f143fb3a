// ddprun's local worker group: fork/exec per local rank, poll-driven output routing, reaping and group signals.
#include "launcher/workers.h"

#include "launcher/env.h"
#include "launcher/signals.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

namespace ddp {

std::string rank_log_path(const std::string& log_dir, int64_t restart_count, int64_t rank) {
  return log_dir + "/attempt_" + std::to_string(restart_count) + "/rank_" + std::to_string(rank) + ".log";
}

WorkerGroup::WorkerGroup(const LaunchOptions& o, const RoundAssignment& a, const std::string& program_path,
                         const std::map<std::string, std::string>& base_env) {
  const int64_t restart_count = a.restart_count;
  try {
    if (!o.log_dir.empty())
      std::filesystem::create_directories(o.log_dir + "/attempt_" + std::to_string(restart_count));
    for (int64_t local_rank = 0; local_rank < o.nproc_per_node; ++local_rank) {
      Worker w;
      w.local_rank = local_rank;
      w.rank = a.first_rank + local_rank;
      const int redirected = o.redirects.for_local_rank(local_rank);
      const int to_file = o.streams_chosen ? (redirected | o.tee.for_local_rank(local_rank)) : (kStdout | kStderr);
      const bool shown = o.local_ranks_filter.empty() ||
                         std::count(o.local_ranks_filter.begin(), o.local_ranks_filter.end(), local_rank) > 0;
      w.output = std::make_unique<RankOutput>(w.rank, shown ? (kStdout | kStderr) & ~redirected : 0, to_file,
                                              o.log_dir.empty() ? "" : rank_log_path(o.log_dir, restart_count, w.rank));
      w.process = spawn_worker(program_path, o.program, worker_env(base_env, o, a, local_rank));
      workers_.push_back(std::move(w));
    }
  } catch (...) {
    stop_started_workers();
    throw;
  }
}

WorkerGroup::~WorkerGroup() {
  for (auto& w : workers_)
    for (int fd : {w.process.stdout_fd, w.process.stderr_fd})
      if (fd >= 0) close(fd);
}

void WorkerGroup::stop_started_workers() {
  signal_all(SIGKILL);
  for (auto& w : workers_)
    if (!w.exited && waitpid(w.process.pid, &w.wait_status, 0) == w.process.pid) w.exited = true;
}

void WorkerGroup::read_pipe(Worker& w, int stream) {
  int& fd = stream == kStdout ? w.process.stdout_fd : w.process.stderr_fd;
  char buf[65536];
  while (fd >= 0) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      w.output->feed(stream, buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {  // end of file (every writer closed it) or an error
      close(fd);
      fd = -1;
    }
  }
}

void WorkerGroup::pump(int timeout_ms) {
  std::vector<pollfd> fds{{launcher_wake_fd(), POLLIN, 0}};
  std::vector<std::pair<Worker*, int>> owners{{nullptr, 0}};
  for (auto& w : workers_) {
    if (w.process.stdout_fd >= 0) fds.push_back({w.process.stdout_fd, POLLIN, 0}), owners.push_back({&w, kStdout});
    if (w.process.stderr_fd >= 0) fds.push_back({w.process.stderr_fd, POLLIN, 0}), owners.push_back({&w, kStderr});
  }
  if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  if (fds[0].revents) drain_wake_fd();
  for (size_t i = 1; i < fds.size(); ++i)
    if (fds[i].revents) read_pipe(*owners[i].first, owners[i].second);
}

std::vector<Worker*> WorkerGroup::reap() {
  std::vector<Worker*> exited;
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (auto& w : workers_) {
      if (w.process.pid != pid) continue;
      w.exited = true;
      w.wait_status = status;
      exited.push_back(&w);
    }
  }
  return exited;
}

void WorkerGroup::signal_all(int sig) {
  for (auto& w : workers_) killpg(w.process.pid, sig);
}

bool WorkerGroup::all_exited() const { return running() == 0; }

size_t WorkerGroup::running() const {
  size_t n = 0;
  for (const auto& w : workers_) n += w.exited ? 0 : 1;
  return n;
}

bool WorkerGroup::any_process_left() const {
  for (const auto& w : workers_)
    if (killpg(w.process.pid, 0) == 0 || errno == EPERM) return true;
  return false;
}

void WorkerGroup::read_available(Worker& w) {
  read_pipe(w, kStdout);
  read_pipe(w, kStderr);
}

void WorkerGroup::drain_output() {
  for (auto& w : workers_) {
    read_pipe(w, kStdout);
    read_pipe(w, kStderr);
    for (int* fd : {&w.process.stdout_fd, &w.process.stderr_fd})
      if (*fd >= 0) close(*fd), *fd = -1;
    w.output->finish();
  }
}

}  // namespace ddp
