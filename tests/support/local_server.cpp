// Test helper: forks, probes, logs and stops a loopback-only server process (killed with the test process).
#include "tests/support/local_server.h"

#include "tests/support/test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

namespace ddp::test {
namespace {

bool accepts_connections(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// Child side of fork (only async-signal-safe calls): log to log_fd, die with the test process, exec argv.
[[noreturn]] void exec_server(int log_fd, int null_fd, char* const* argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  dup2(null_fd, 0);
  dup2(log_fd, 1);
  dup2(log_fd, 2);
  close_range(3, ~0U, 0);
  execvp(argv[0], argv);
  _exit(127);
}

}  // namespace

LocalServer::LocalServer(std::vector<std::string> command, std::string log_path, std::string what,
                         const std::function<void(int port)>& before_start)
    : log_path_(std::move(log_path)) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = free_port();
    if (before_start) before_start(port_);
    std::vector<std::string> args = command;
    for (std::string& a : args)
      for (size_t at = a.find("{port}"); at != std::string::npos; at = a.find("{port}"))
        a.replace(at, 6, std::to_string(port_));
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (log_fd < 0 || null_fd < 0) throw std::runtime_error("cannot open " + log_path_ + " or /dev/null");
    pid_ = fork();
    if (pid_ == 0) exec_server(log_fd, null_fd, argv.data());
    close(log_fd);
    close(null_fd);
    if (pid_ < 0) throw std::runtime_error("fork failed");
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {  // exited: its port in use, or no such program
        pid_ = 0;
        break;
      }
      if (accepts_connections(port_)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    stop();
  }
  throw std::runtime_error(what + " did not start; its log: " + log());
}

void LocalServer::stop() {
  if (pid_ <= 0) return;
  if (kill(pid_, SIGKILL) == 0) waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

LocalServer::~LocalServer() {
  stop();
  std::remove(log_path_.c_str());
}

std::string LocalServer::url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }

std::string LocalServer::log() const {
  try {
    return read_file(log_path_);
  } catch (const std::runtime_error&) {
    return "";
  }
}

}  // namespace ddp::test
