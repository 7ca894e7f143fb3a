// Test helper: Python's http.server on 127.0.0.1 serving one folder, with its request log.
#pragma once

#include <string>

namespace ddp::test {

// Starts `python3 -m http.server` bound to 127.0.0.1 on a free port and waits until it accepts connections;
// the destructor stops it, and so does the test process's death. Throws std::runtime_error if it does not come up
// within 10 s.
class LocalHttpServer {
 public:
  explicit LocalHttpServer(const std::string& root);
  ~LocalHttpServer();
  LocalHttpServer(const LocalHttpServer&) = delete;
  LocalHttpServer& operator=(const LocalHttpServer&) = delete;

  std::string url() const;  // "http://127.0.0.1:PORT/"
  int port() const { return port_; }
  // GET requests for /name seen so far (from the server's request log).
  int gets_of(const std::string& name) const;
  std::string log() const;

 private:
  void stop();
  std::string log_path_;
  int port_ = 0;
  int pid_ = 0;
};

}  // namespace ddp::test
