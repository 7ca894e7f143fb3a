// Test helper: an nginx configuration written for one folder and port, nginx run in the foreground as one process.
#include "tests/support/nginx_server.h"

#include "tests/support/test_support.h"

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

namespace ddp::test {

bool have_nginx() { return run_command("command -v nginx >/dev/null || test -x /usr/sbin/nginx").exit_code == 0; }

NginxServer::NginxServer(const std::string& root, const std::string& server_lines) : dir_(root + ".nginx") {
  std::filesystem::create_directories(dir_);
  const std::string conf = dir_ + "/nginx.conf";
  const std::string nginx = run_command("command -v nginx").exit_code == 0 ? "nginx" : "/usr/sbin/nginx";
  server_ = std::make_unique<LocalServer>(
      std::vector<std::string>{nginx, "-e", dir_ + "/error.log", "-c", conf}, dir_ + "/output.log", "nginx",
      [&](int port) {
        write_file(conf,
                   "daemon off;\nmaster_process off;\nerror_log " + dir_ + "/error.log info;\npid " + dir_ +
                       "/nginx.pid;\nevents { worker_connections 256; }\nhttp {\n"
                       "  log_format ranges '$request_method $uri $status $body_bytes_sent $connection $http_range';\n"
                       "  access_log " +
                       dir_ + "/access.log ranges;\n  server {\n    listen 127.0.0.1:" + std::to_string(port) +
                       ";\n    root " + root + ";\n    " + server_lines + "\n  }\n}\n");
      });
}

std::string NginxServer::requests() const {
  // nginx logs a request after its answer is sent: the log is read once it has not grown for 100 ms.
  const auto read = [&] {
    try {
      return read_file(dir_ + "/access.log");
    } catch (const std::runtime_error&) {
      return std::string();
    }
  };
  std::string last = read();
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::string now = read();
    if (now == last) break;
    last = std::move(now);
  }
  return last;
}

int NginxServer::count(const std::string& path, int status) const {
  std::istringstream lines(requests());
  int n = 0;
  for (std::string method, uri, code, rest; lines >> method >> uri >> code && std::getline(lines, rest);)
    n += uri == path && code == std::to_string(status);
  return n;
}

std::string NginxServer::error_log() const {
  try {
    return read_file(dir_ + "/error.log");
  } catch (const std::runtime_error&) {
    return "";
  }
}

}  // namespace ddp::test
