// Test helper: runs a function in a forked child with a time limit and reports how it ended and its peak memory.
#include "tests/support/child_run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace ddp::test {
namespace {

// A "VmRSS:"-style line of /proc/self/status, in kB.
long child_run_status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field));
  return -1;
}

void child_run_write_all(int fd, const std::string& s) {
  for (size_t done = 0; done < s.size();) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

ChildRun run_in_child(const std::function<std::string()>& fn, unsigned timeout_s) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(timeout_s);
    const long start_kb = child_run_status_kb("VmRSS:");
    std::string result;
    try {
      result = fn();
    } catch (const std::exception& e) {
      result = std::string("threw: ") + e.what();
    }
    const long peak_kb = child_run_status_kb("VmHWM:");
    child_run_write_all(fds[1], std::to_string(peak_kb - start_kb) + "\n" + result);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ChildRun run;
  run.exited = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !out.empty();
  run.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  const size_t nl = out.find('\n');
  if (nl != std::string::npos) {
    run.peak_growth_mb = std::atof(out.substr(0, nl).c_str()) / 1024.0;
    run.result = out.substr(nl + 1);
  }
  return run;
}

}  // namespace ddp::test
