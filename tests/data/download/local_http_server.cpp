// Test helper: a loopback-only Python http.server and the GET requests of its log.
#include "tests/data/download/local_http_server.h"

#include "tests/support/test_support.h"

namespace ddp::test {

LocalHttpServer::LocalHttpServer(const std::string& root)
    : server_({python(), "-u", "-m", "http.server", "--bind", "127.0.0.1", "{port}", "--directory", root},
              root + ".server.log", "http.server") {}

int LocalHttpServer::gets_of(const std::string& name) const {
  std::string text = log(), needle = "\"GET /" + name + " ";
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

}  // namespace ddp::test
