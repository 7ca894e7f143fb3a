// ddprun process plumbing: finding PROGRAM, starting a worker in its own process group, naming exit statuses.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace ddp {

struct ChildProcess {
  pid_t pid = -1;       // also the worker's process group id
  int stdout_fd = -1;   // non-blocking read ends of the worker's stdout and stderr
  int stderr_fd = -1;
};

// PROGRAM as execve needs it: names without '/' are looked up on PATH. Throws LaunchUsageError when it is
// missing or not executable.
std::string resolve_program(const std::string& program);

// Forks and execs `path` with argv and exactly `env`; the child leads a new process group, reads /dev/null,
// writes to two pipes, and gets SIGKILL if ddprun dies. Throws std::runtime_error if fork or pipe fails.
ChildProcess spawn_worker(const std::string& path, const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env);

// Makes orphaned descendants of the workers children of ddprun, so it can reap and account for them.
void become_child_subreaper();

// "SIGKILL" for 9, "signal 77" for unknown numbers.
std::string signal_name(int sig);
// "exited with code 3", "was killed by signal SIGKILL (9)".
std::string describe_wait_status(int status);
bool wait_status_ok(int status);

}  // namespace ddp
