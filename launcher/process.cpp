// ddprun process plumbing: PATH lookup, fork/exec into a new process group with output pipes, status names.
#include "launcher/process.h"

#include "launcher/options.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace ddp {
namespace {

bool executable_file(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// Only async-signal-safe calls between fork and exec: the parent may have threads (the TCPStore server).
[[noreturn]] void exec_child(pid_t parent, int devnull, int out_w, int err_w, const char* path, char* const* argv,
                             char* const* envp, const char* exec_failed_msg, size_t msg_len) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  dup2(devnull, 0);
  dup2(out_w, 1);
  dup2(err_w, 2);
  if (close_range(3, ~0U, 0) != 0)
    for (int fd = 3; fd < 4096; ++fd) close(fd);
  // exec resets handled signals; SIGPIPE is the one ddprun ignores itself. Inherited SIG_IGNs (nohup) stay.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(path, argv, envp);
  ssize_t ignored = write(2, exec_failed_msg, msg_len);
  (void)ignored;
  _exit(127);
}

}  // namespace

std::string resolve_program(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (!executable_file(program)) throw LaunchUsageError("PROGRAM " + program + " is missing or not executable");
    return program;
  }
  const char* path_env = std::getenv("PATH");
  std::stringstream dirs(path_env ? path_env : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (executable_file(candidate)) return candidate;
  }
  throw LaunchUsageError("PROGRAM " + program + " is not found on PATH");
}

ChildProcess spawn_worker(const std::string& path, const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env) {
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv_ptrs, env_ptrs;
  for (const auto& a : argv) argv_ptrs.push_back(const_cast<char*>(a.c_str()));
  argv_ptrs.push_back(nullptr);
  for (const auto& e : env_strings) env_ptrs.push_back(const_cast<char*>(e.c_str()));
  env_ptrs.push_back(nullptr);
  const std::string exec_failed = "ddprun: cannot execute " + path + "\n";

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]), close(out_pipe[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0)
    exec_child(parent, devnull, out_pipe[1], err_pipe[1], path.c_str(), argv_ptrs.data(), env_ptrs.data(),
               exec_failed.c_str(), exec_failed.size());
  const int fork_errno = errno;
  close(devnull);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    close(out_pipe[0]), close(err_pipe[0]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(fork_errno));
  }
  setpgid(pid, pid);  // also done by the child; whichever runs first wins the race with killpg
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  return ChildProcess{pid, out_pipe[0], err_pipe[0]};
}

void become_child_subreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1); }

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + signal_name(sig) + " (" + std::to_string(sig) + ")" +
           (WCOREDUMP(status) ? ", core dumped" : "");
  }
  return "stopped with wait status " + std::to_string(status);
}

bool wait_status_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace ddp
