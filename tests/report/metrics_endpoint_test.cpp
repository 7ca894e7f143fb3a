// metrics.listen (report/metrics_endpoint.h): /metrics in Prometheus' text format (checked by promtool, scraped by a
// real Prometheus from a 2-rank run and queried through its HTTP API), /healthz, and requests that change nothing.
#include "report/metrics_endpoint.h"
#include "tests/support/test_support.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace ddp::test {
namespace {

// Connects to ADDRESS:port; -1 when refused.
int connect_to(const char* address, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address, &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` and reads the answer until the server closes.
std::string http_exchange(int port, const std::string& request) {
  const int fd = connect_to("127.0.0.1", port);
  if (fd < 0) return "refused";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) out.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

std::string http_get(int port, const std::string& path) {
  return http_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
}

std::string body_of(const std::string& response) { return response.substr(response.find("\r\n\r\n") + 4); }

MetricValues train_values_of(const std::vector<std::pair<std::string, MetricValue>>& fields) {
  MetricValues out;
  for (const auto& [field, value] : fields)
    for (const MetricRow& row : metrics_table())
      if (row.kind == RecordKind::kTrain && field == row.field) out.emplace_back(&row, value);
  return out;
}

TEST(MetricsEndpoint, ServesTheLastRecordsGaugesAndHealth) {
  MetricsEndpoint endpoint("127.0.0.1:0", 0.5);
  ASSERT_GT(endpoint.port(), 0);
  endpoint.step_done(5);
  endpoint.publish(RecordKind::kTrain, train_values_of({{"loss", 0.25}, {"samples_per_s", 123.5}, {"step", 5}}));
  const std::string page = http_get(endpoint.port(), "/metrics");
  EXPECT_EQ(page.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << page;
  EXPECT_NE(page.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << page;
  for (const char* line :
       {"\nddptrain_step 5\n", "\nddptrain_train_loss 0.25\n", "\nddptrain_train_samples_per_second 123.5\n",
        "# TYPE ddptrain_train_loss gauge\n", "\nddptrain_healthy 1\n"})
    EXPECT_NE(page.find(line), std::string::npos) << line << " in\n" << page;
  // promtool (Prometheus' own checker) reads the page as valid exposition text.
  if (run_command("command -v promtool >/dev/null").exit_code == 0) {
    TempDir dir;
    write_file(dir / "page.txt", body_of(page));
    const CommandResult check = run_command("promtool check metrics < " + shell_quote(dir / "page.txt") + " 2>&1");
    EXPECT_EQ(check.exit_code, 0) << check.output;
  }
  EXPECT_EQ(http_get(endpoint.port(), "/healthz").rfind("HTTP/1.1 200 OK", 0), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const std::string stalled = http_get(endpoint.port(), "/healthz");
  EXPECT_EQ(stalled.rfind("HTTP/1.1 503", 0), 0u) << stalled;
  EXPECT_NE(http_get(endpoint.port(), "/metrics").find("\nddptrain_healthy 0\n"), std::string::npos);
  endpoint.step_done(6);
  EXPECT_EQ(http_get(endpoint.port(), "/healthz").rfind("HTTP/1.1 200 OK", 0), 0u);
}

TEST(MetricsEndpoint, HostileRequestsChangeNothingAndAreBounded) {
  MetricsEndpoint endpoint("127.0.0.1:0", 600);
  const int port = endpoint.port();
  endpoint.step_done(7);
  const std::string before = body_of(http_get(port, "/metrics"));
  const auto status_of = [&](const std::string& request) { return http_exchange(port, request).substr(0, 12); };
  EXPECT_EQ(status_of("POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"), "HTTP/1.1 405");
  EXPECT_EQ(status_of("DELETE /healthz HTTP/1.1\r\n\r\n"), "HTTP/1.1 405");
  EXPECT_EQ(status_of("GET /../../etc/passwd HTTP/1.1\r\n\r\n"), "HTTP/1.1 404");
  EXPECT_EQ(status_of("\x01\x02\x03\r\n\r\n"), "HTTP/1.1 400");
  EXPECT_EQ(status_of("GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n"), "HTTP/1.1 431");
  EXPECT_EQ(status_of("GET /metrics?step=0 HTTP/1.1\r\n\r\n"), "HTTP/1.1 200");
  // A client that sends nothing is closed after the request timeout; the next one is served.
  const auto start = std::chrono::steady_clock::now();
  const int silent = connect_to("127.0.0.1", port);
  ASSERT_GE(silent, 0);
  char byte;
  EXPECT_EQ(::recv(silent, &byte, 1, 0), 0);  // closed by the server
  ::close(silent);
  EXPECT_LT(std::chrono::steady_clock::now() - start, MetricsEndpoint::kRequestTimeout + std::chrono::seconds(2));
  EXPECT_EQ(body_of(http_get(port, "/metrics")).find("ddptrain_step 7"), before.find("ddptrain_step 7"));
  EXPECT_NE(before.find("\nddptrain_step 7\n"), std::string::npos) << before;
  // Bound to the given address only: another loopback address is refused.
  EXPECT_EQ(connect_to("127.0.0.2", port), -1);
}

TEST(MetricsEndpoint, AnAddressItCannotBindIsOneErrorNamingTheKey) {
  MetricsEndpoint first("127.0.0.1:0", 600);
  const std::string taken = "127.0.0.1:" + std::to_string(first.port());
  const std::string error = error_of([&] { MetricsEndpoint second(taken, 600); });
  EXPECT_NE(error.find("metrics.listen = \"" + taken + "\": cannot listen there"), std::string::npos) << error;
  TempDir dir;
  write_tiny_mnist(dir / "data", 32, 16, 1);
  const std::string cfg = write_mnist_job(dir, dir / "data", {"job.out_dir=" + dir / "out", "training.max_steps=1"});
  const CommandResult bad = run_command(ddptrain_path() + " " + cfg + " --metrics.listen=localhost");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("metrics.listen = \"localhost\" is not HOST:PORT"), std::string::npos) << bad.output;
}

// A real Prometheus (Debian's) scrapes rank 0 of a 2-rank run every second and answers a PromQL query through its
// HTTP API with the run's step; promtool reads the live page as valid.
TEST(MetricsEndpoint, PrometheusScrapesATwoRankRunAndAnswersAQuery) {
  if (run_command("command -v prometheus >/dev/null").exit_code != 0) GTEST_SKIP() << "prometheus absent";
  TempDir dir;
  write_tiny_mnist(dir / "data", 256, 16, 2);
  const int target = free_port(), web = free_port();
  const std::string cfg =
      write_mnist_job(dir, dir / "data",
                      {"job.out_dir=" + dir / "out", "training.max_steps=1000000", "data.batch_size=8",
                       "metrics.progress=plain", "metrics.listen=127.0.0.1:" + std::to_string(target)});
  write_file(dir / "prometheus.yml",
             "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
             "scrape_configs:\n  - job_name: ddptrain\n    static_configs:\n"
             "      - targets: ['127.0.0.1:" +
                 std::to_string(target) + "']\n");
  const std::string api = "http://127.0.0.1:" + std::to_string(web) + "/api/v1/query?query=";
  const std::string script =
      "set -u\n"
      "prometheus --config.file=" +
      shell_quote(dir / "prometheus.yml") + " --storage.tsdb.path=" + shell_quote(dir / "tsdb") +
      " --web.listen-address=127.0.0.1:" + std::to_string(web) + " > " + shell_quote(dir / "prometheus.log") +
      " 2>&1 &\nprom=$!\n"
      "setsid " +
      binary_dir() + "/ddprun --standalone --nproc_per_node=2 " + ddptrain_path() + " " + cfg + " > " +
      shell_quote(dir / "train.log") +
      " 2>&1 &\ntrain=$!\n"
      "answer=\n"
      "for i in $(seq 1 120); do\n"
      "  answer=$(curl -sf '" +
      api +
      "max(ddptrain_step)%20%3E%200' || true)\n"
      "  case \"$answer\" in *'\"result\":[{'*) break;; esac\n"
      "  sleep 0.5\n"
      "done\n"
      "echo \"query: $answer\"\n"
      "curl -sf http://127.0.0.1:" +
      std::to_string(target) + "/metrics > " + shell_quote(dir / "page.txt") +
      "\n"
      "promtool check metrics < " +
      shell_quote(dir / "page.txt") +
      "; echo \"promtool rc $?\"\n"
      "kill -TERM -- -$train 2>/dev/null; wait $train; kill $prom; wait $prom\n";
  write_file(dir / "scrape.sh", script);
  const CommandResult r = run_command("bash " + shell_quote(dir / "scrape.sh") + " 2>&1");
  EXPECT_NE(r.output.find("\"status\":\"success\""), std::string::npos)
      << r.output << "\n"
      << read_file(dir / "train.log") << read_file(dir / "prometheus.log");
  EXPECT_NE(r.output.find("\"result\":[{"), std::string::npos) << r.output << "\n" << read_file(dir / "train.log");
  // The whole page of a live run, every train record's field among it, is valid and lint-clean to promtool.
  EXPECT_NE(r.output.find("promtool rc 0"), std::string::npos) << r.output;
  EXPECT_NE(read_file(dir / "page.txt").find("\nddptrain_train_time_data_seconds "), std::string::npos)
      << read_file(dir / "page.txt");
  EXPECT_NE(read_file(dir / "train.log").find("metrics.listen: http://127.0.0.1:"), std::string::npos)
      << read_file(dir / "train.log");
}

}  // namespace
}  // namespace ddp::test
