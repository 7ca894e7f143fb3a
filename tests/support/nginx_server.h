// Test helper: nginx (Debian's nginx-light) serving a folder on 127.0.0.1, one process, its access log read back.
#pragma once

#include "tests/support/local_server.h"

#include <memory>
#include <string>

namespace ddp::test {

// Whether nginx is installed (scripts/setup installs it for the test suite).
bool have_nginx();

class NginxServer {
 public:
  // Serves `root` (static files, Range requests answered as nginx answers them) on a free port; `server_lines` go
  // into the server block (e.g. "location = /s/a.tar { return 500; }"). Its configuration and logs lie in a folder
  // beside `root`.
  explicit NginxServer(const std::string& root, const std::string& server_lines = "");

  std::string url() const { return server_->url(); }  // "http://127.0.0.1:PORT/"
  // The requests served so far (read once its log has settled), one line each: "METHOD PATH STATUS BYTES CONNECTION
  // RANGE" (CONNECTION the serial number of the connection that carried it, RANGE "-" when none).
  std::string requests() const;
  // How many requests for PATH ("/s/a.tar") got STATUS.
  int count(const std::string& path, int status) const;
  std::string error_log() const;

 private:
  std::string dir_;
  std::unique_ptr<LocalServer> server_;
};

}  // namespace ddp::test
