// Test helper: Python's http.server on 127.0.0.1 serving one folder, with its request log.
#pragma once

#include "tests/support/local_server.h"

#include <string>

namespace ddp::test {

// Starts `python3 -m http.server` bound to 127.0.0.1 on a free port and waits until it accepts connections;
// the destructor stops it, and so does the test process's death. Throws std::runtime_error if it does not come up
// within 10 s.
class LocalHttpServer {
 public:
  explicit LocalHttpServer(const std::string& root);

  std::string url() const { return server_.url(); }  // "http://127.0.0.1:PORT/"
  int port() const { return server_.port(); }
  // GET requests for /name seen so far (from the server's request log).
  int gets_of(const std::string& name) const;
  std::string log() const { return server_.log(); }

 private:
  LocalServer server_;
};

}  // namespace ddp::test
