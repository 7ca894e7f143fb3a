// ddptest_python: the `python` the tests run their oracles with, which hands each run to a fork server.
//
// Every oracle run would otherwise import torch and torchvision afresh (4-6 CPU seconds on a 2-core machine, more
// than most oracles then compute). `ddptest_python [-u] [-B] (-c CODE | SCRIPT) ARGS...` sends its argv, directory,
// environment and standard streams to python_fork_server.py, which has imported them once, forks, and runs the
// request in the child as that command line would; this process waits, passes on the signals it gets, and exits as
// the child did (a SIGKILL of this process kills the child's process group). Every other command line (-m, other
// flags), and a run in other namespaces than those DDP_PYTHON_FORK_NAMESPACES names (the test process's: the
// servers live there), exec the real interpreter. One server serves each interpreter and set of the environment
// variables that shape an import (OMP_*, MKL_*, ATEN_*, ONEDNN_*, TORCH_*, PYTHON*, LANG, LC_*, LD_*, ...); it starts
// on the first request and leaves after DDP_PYTHON_FORK_IDLE_S (60) seconds without one. DDP_PYTHON_FORK=0 turns it
// off.
#include "tests/support/python_fork/namespaces.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

const char* const kPython = DDP_REAL_PYTHON;
const char* const kServer = DDP_FORK_SERVER;
int g_socket = -1;

[[noreturn]] void exec_python(char** argv) {
  argv[0] = const_cast<char*>(kPython);
  execv(kPython, argv);
  std::fprintf(stderr, "ddptest_python: cannot run %s: %s\n", kPython, std::strerror(errno));
  _exit(127);
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Variables read while torch, torchvision and numpy import (thread pools, CPU dispatch, allocators, logging, the
// interpreter's own): a server is shared only by requests that agree on all of them.
bool shapes_import(const std::string& name) {
  for (const char* p : {"OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "ATEN_", "ONEDNN_", "DNNL_", "TORCH", "PYTORCH_",
                        "CUDA_", "NCCL_", "PYTHON", "LC_", "LD_", "MALLOC_", "NUMPY_"})
    if (starts_with(name, p)) return true;
  return name == "LANG" || name == "HOME" || name == "PATH";
}

std::vector<std::string> import_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    if (shapes_import(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  return env;
}

std::string server_name(const std::vector<std::string>& env, const std::string& ns) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the interpreter, the server script's identity and the env
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  mix(kPython);
  mix(kServer);
  mix(ns);
  struct stat st {};
  if (stat(kServer, &st) == 0) mix(std::to_string(st.st_mtime) + "/" + std::to_string(st.st_size));
  for (const auto& kv : env) mix(kv);
  char buf[64];
  std::snprintf(buf, sizeof buf, "ddptest-python-%u-%016llx", static_cast<unsigned>(getuid()),
                static_cast<unsigned long long>(h));
  return buf;
}

int connect_to(const std::string& name) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0) return fd;
  close(fd);
  return -1;
}

// Starts a server detached from this process (its own session, no inherited descriptors, output to /dev/null), with
// the import-shaping environment only.
void start_server(const std::string& name, const std::vector<std::string>& env) {
  const char* idle = std::getenv("DDP_PYTHON_FORK_IDLE_S");
  const std::string idle_s = idle && *idle ? idle : "60";
  const pid_t pid = fork();
  if (pid < 0) return;
  if (pid == 0) {
    setsid();
    if (fork() != 0) _exit(0);
    const int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    if (chdir("/") != 0) _exit(1);
    std::vector<char*> envp;
    for (const auto& kv : env) envp.push_back(const_cast<char*>(kv.c_str()));
    envp.push_back(nullptr);
    const char* argv[] = {kPython, kServer, name.c_str(), idle_s.c_str(), nullptr};
    execve(kPython, const_cast<char**>(argv), envp.data());
    _exit(127);
  }
  waitpid(pid, nullptr, 0);
}

void forward_signal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (g_socket >= 0) (void)!write(g_socket, &byte, 1);
}

bool send_request(int fd, const std::string& body) {
  uint32_t size = static_cast<uint32_t>(body.size());
  char header[4];
  std::memcpy(header, &size, 4);  // little-endian, as the server unpacks it
  iovec iov{header, 4};
  int fds[3] = {0, 1, 2};
  char control[CMSG_SPACE(sizeof fds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(cmsg), fds, sizeof fds);
  if (sendmsg(fd, &msg, MSG_NOSIGNAL) != 4) return false;
  for (size_t at = 0; at < body.size();) {
    const ssize_t n = send(fd, body.data() + at, body.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // The command lines served: [-u] [-B] (-c CODE | SCRIPT) ARGS...; a script's path does not start with '-'.
  std::string flags, mode, target;
  int i = 1;
  for (; i < argc && (std::strcmp(argv[i], "-u") == 0 || std::strcmp(argv[i], "-B") == 0); ++i) flags += argv[i][1];
  if (i + 1 < argc && std::strcmp(argv[i], "-c") == 0) {
    mode = "c";
    target = argv[i + 1];
    i += 2;
  } else if (i < argc && argv[i][0] != '-' && argv[i][0] != '\0') {
    mode = "file";
    target = argv[i];
    i += 1;
  }
  // A run in other namespaces than the test process's (ip netns exec, unshare) is a fresh interpreter there.
  const char* off = std::getenv("DDP_PYTHON_FORK");
  const char* home_ns = std::getenv("DDP_PYTHON_FORK_NAMESPACES");
  const std::string ns = ddp::test::namespaces();
  if (mode.empty() || (off && std::strcmp(off, "0") == 0) || ns.empty() || (home_ns && ns != home_ns))
    exec_python(argv);

  const std::vector<std::string> env = import_environment();
  const std::string name = server_name(env, ns);
  int fd = connect_to(name);
  if (fd < 0) {
    start_server(name, env);
    // The server binds its name before it imports anything, so a connection succeeds within the interpreter's start.
    for (int tries = 0; fd < 0 && tries < 1500; ++tries) {
      usleep(20000);
      fd = connect_to(name);
    }
    if (fd < 0) exec_python(argv);
  }

  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) exec_python(argv);
  std::string body = mode + '\0' + target + '\0' + flags + '\0' + cwd + '\0' + std::to_string(argc - i);
  for (int a = i; a < argc; ++a) body += '\0' + std::string(argv[a]);
  for (char** e = environ; *e; ++e) body += '\0' + std::string(*e);
  if (!send_request(fd, body)) exec_python(argv);

  g_socket = fd;
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT}) sigaction(sig, &sa, nullptr);

  // "pid N\n" once the child runs, then "exit STATUS\n".
  std::string reply;
  char buf[256];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
    if (reply.find("exit ") != std::string::npos && reply.back() == '\n') break;
  }
  const size_t at = reply.find("exit ");
  if (at == std::string::npos) {
    if (reply.find("pid ") == std::string::npos) exec_python(argv);  // the server left before running it
    std::fprintf(stderr, "ddptest_python: the fork server went away while %s ran\n", target.c_str());
    return 1;
  }
  const int status = std::atoi(reply.c_str() + at + 5);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    kill(getpid(), WTERMSIG(status));
  }
  return 1;
}
