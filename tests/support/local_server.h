// Test helper: a server process a test starts on 127.0.0.1 and a free port, stopped with the test.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ddp::test {

// Runs `command`, each "{port}" in it replaced by a free port, until it accepts connections on 127.0.0.1 (three ports
// are tried, in case another process takes one meanwhile); its standard output and error go to `log_path`.
// `before_start(port)` runs before each try (to write a configuration that names the port). Throws
// std::runtime_error naming `what` and quoting the log when it does not come up within 10 s. The destructor stops it,
// and so does the test process's death.
class LocalServer {
 public:
  LocalServer(std::vector<std::string> command, std::string log_path, std::string what,
              const std::function<void(int port)>& before_start = {});
  ~LocalServer();
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  int port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:PORT/"
  std::string log() const;  // what it wrote so far
  void stop();              // SIGKILL, waited for

 private:
  std::string log_path_;
  int port_ = 0;
  int pid_ = 0;
};

}  // namespace ddp::test
