// metrics.mlflow_uri (report/mlflow/): a real MLflow server gets a 2-rank run's params, metrics and artifacts, and a
// resumed run logs on into the same MLflow run; a server that refuses or never answers neither stops nor slows a run.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <regex>
#include <thread>

namespace ddp::test {
namespace {

// `mlflow server` from the MLflow test venv on a free port (sqlite backend store, artifacts served through its
// proxy into a folder), stopped with its process group.
class MlflowServerProcess {
 public:
  explicit MlflowServerProcess(const TempDir& dir) : port_(free_port()) {
    const CommandResult started = run_command(
        "setsid " + shell_quote(mlflow_python()) + " -m mlflow server --host 127.0.0.1 --port " +
        std::to_string(port_) + " --workers 1 --backend-store-uri " + shell_quote("sqlite:///" + dir / "mlflow.db") +
        " --artifacts-destination " + shell_quote(dir / "artifacts") + " > " + shell_quote(dir / "server.log") +
        " 2>&1 < /dev/null & echo $!");
    pid_ = std::atoi(started.output.c_str());
    // It takes seconds to come up: /health answers once it serves. Each kind of request then takes seconds more the
    // first time (imports on first use): a warm-up run of its own makes them all before the run under test.
    const char* warm_up =
        "import sys, tempfile\n"
        "from mlflow.tracking import MlflowClient\n"
        "c = MlflowClient(sys.argv[1])\n"
        "c.get_experiment_by_name('absent')\n"
        "run = c.create_run(c.create_experiment('warm-up')).info.run_id\n"
        "c.log_param(run, 'p', '1')\n"
        "c.log_metric(run, 'm', 1.0, step=1)\n"
        "with tempfile.NamedTemporaryFile('w', suffix='.txt') as f:\n"
        "    f.write('x')\n"
        "    f.flush()\n"
        "    c.log_artifact(run, f.name)\n"
        "c.set_terminated(run)\n";
    up_ = run_command("for i in $(seq 1 240); do curl -sf " + uri() +
                      "/health >/dev/null && break; sleep 0.25; done; " + shell_quote(mlflow_python()) + " -c " +
                      shell_quote(warm_up) + " " + uri() + " >> " + shell_quote(dir / "server.log") + " 2>&1")
              .exit_code == 0;
  }
  ~MlflowServerProcess() {
    // Its job consumers (huey) may outlive a SIGTERM: the group is killed after a moment.
    const std::string group = " -- -" + std::to_string(pid_) + " 2>/dev/null";
    if (pid_ > 0) run_command("kill -TERM" + group + "; sleep 0.5; kill -KILL" + group);
  }
  std::string uri() const { return "http://127.0.0.1:" + std::to_string(port_); }
  bool up() const { return up_; }

 private:
  int port_ = 0, pid_ = 0;
  bool up_ = false;
};

// The "MLflow run ID at URI" line's ID in a run's output; "" when absent.
std::string mlflow_run_of(const std::string& output) {
  std::smatch m;
  return std::regex_search(output, m, std::regex("MLflow run ([0-9a-f]+) at ")) ? m[1].str() : "";
}

TEST(MlflowTracking, LogsParamsMetricsAndArtifactsAndAResumeContinuesTheRun) {
  if (!python_has_modules("mlflow", mlflow_python())) GTEST_SKIP() << "no mlflow in " << mlflow_python();
  TempDir dir;
  MlflowServerProcess server(dir);
  ASSERT_TRUE(server.up()) << read_file(dir / "server.log");
  const std::string cfg =
      write_tiny_job(dir, 96, 32, 5,
                     {"job.name=mlflow-job", "job.out_dir=" + dir / "out", "data.batch_size=8", "training.max_steps=3",
                      "checkpoint.every_epochs=1", "metrics.log_every_steps=1", "metrics.progress=plain",
                      "metrics.mlflow_uri=" + server.uri(), "metrics.mlflow_experiment=ddptrain-test"});
  const CommandResult printed = run_command(ddptrain_path() + " " + cfg + " --print-config");
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  write_file(dir / "printed.toml", printed.output);
  const auto first = run_ranks(2, cfg);
  for (const auto& r : first) ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string run = mlflow_run_of(first[0].output);
  ASSERT_FALSE(run.empty()) << first[0].output << read_file(dir / "server.log");
  EXPECT_EQ(warnings_of_the_job(first[0].output), "") << first[0].output;
  // More steps from the final checkpoint: the same MLflow run, its metrics going on from step 4.
  const auto resumed = run_ranks(2, cfg + " --training.max_steps=6");
  for (const auto& r : resumed) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(resumed[0].output.find("resumed from"), std::string::npos) << resumed[0].output;
  EXPECT_EQ(mlflow_run_of(resumed[0].output), run) << resumed[0].output;
  // The params are the first run's config (MLflow keeps a param's first value); the metrics both runs' records.
  const CommandResult check =
      run_command(shell_quote(mlflow_python()) + " " + shell_quote(source_dir() + "/tests/report/mlflow_check.py") +
                  " " + server.uri() + " ddptrain-test mlflow-job " + shell_quote(dir / "out") + " " +
                  shell_quote(dir / "printed.toml") + " 2>&1");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("run " + run + "\n"), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("\nok\n"), std::string::npos) << check.output;
}

// A listening socket that never accepts: the kernel completes connections into its backlog, nobody answers.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0 && ::listen(fd_, 64) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port_ = ntohs(a.sin_port);
  }
  ~SilentServer() { ::close(fd_); }
  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1, port_ = 0;
};

// Answers every request it gets with `answer` (a whole HTTP response) on a thread of its own, each on a new
// connection: a proxy's login page, say, or an error page.
class AnsweringServer {
 public:
  explicit AnsweringServer(std::string answer) : silent_(), answer_(std::move(answer)) {
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{silent_.fd(), POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        const int c = ::accept4(silent_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        std::string request;
        char buf[4096];
        size_t need = std::string::npos;  // the request's length, once its headers are in
        while (need == std::string::npos || request.size() < need) {
          pollfd q{c, POLLIN, 0};
          if (::poll(&q, 1, 2000) <= 0) break;
          const ssize_t n = ::recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          request.append(buf, static_cast<size_t>(n));
          const size_t head = request.find("\r\n\r\n");
          if (need == std::string::npos && head != std::string::npos) {
            std::smatch m;
            const std::string headers = request.substr(0, head);
            need =
                head + 4 +
                (std::regex_search(headers, m, std::regex("[Cc]ontent-[Ll]ength: *([0-9]+)")) ? std::stoul(m[1].str())
                                                                                              : 0);
          }
        }
        (void)!::send(c, answer_.data(), answer_.size(), MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~AnsweringServer() {
    stop_ = true;
    thread_.join();
  }
  int port() const { return silent_.port(); }

 private:
  SilentServer silent_;
  std::string answer_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// An HTTP response of `status` with `body`.
std::string http_answer(const std::string& status, const std::string& type, const std::string& body) {
  return "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

struct TimedRun {
  CommandResult result;
  double seconds = 0;
};

TimedRun timed_run(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  TimedRun t{run_command(command), 0};
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

TEST(MlflowTracking, ARefusingOrSilentServerNeitherStopsNorSlowsTheRun) {
  TempDir dir;
  SilentServer silent;
  ASSERT_GT(silent.port(), 0);
  const std::string cfg = write_tiny_job(dir, 96, 32, 5,
                                         {"job.out_dir=" + dir / "out", "data.batch_size=8", "training.max_steps=6",
                                          "metrics.log_every_steps=1", "metrics.progress=plain"});
  const TimedRun alone = timed_run(ddptrain_path() + " " + cfg + " 2>&1");
  ASSERT_EQ(alone.result.exit_code, 0) << alone.result.output;
  for (const int port : {free_port(), silent.port()}) {
    const std::string uri = "http://127.0.0.1:" + std::to_string(port);
    const TimedRun r = timed_run(ddptrain_path() + " " + cfg + " --metrics.mlflow_uri=" + uri + " 2>&1");
    ASSERT_EQ(r.result.exit_code, 0) << r.result.output;
    // One warning naming the URI and what failed, and the records' fate at the end.
    EXPECT_EQ(count_of(r.result.output, "warning: metrics.mlflow_uri " + uri + ": "), 1u) << r.result.output;
    EXPECT_NE(r.result.output.find("records dropped"), std::string::npos) << r.result.output;
    EXPECT_LT(r.seconds, alone.seconds + 2.0) << "alone " << alone.seconds << " s\n" << r.result.output;
  }
}

// A server that answers what MLflow's API does not (a proxy's HTML page with 200, JSON without the fields asked for,
// an error page of several lines), a run name that is not UTF-8, a URI with a password: the run goes on, with one
// warning on one line naming the URI without its password.
TEST(MlflowTracking, AnswersThatAreNotTheApisAreOneWarningLineAndThePasswordIsNeverShown) {
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 48, 16, 5,
                                         {"job.out_dir=" + dir / "out", "data.batch_size=8", "training.max_steps=2",
                                          "metrics.log_every_steps=1", "metrics.progress=plain"});
  const std::string page = "<html>\n<body>\r\nSign in to continue\n</body>\n</html>\n";
  const std::vector<std::pair<std::string, std::string>> servers = {
      {http_answer("200 OK", "text/html", page),
       "GET /api/2.0/mlflow/experiments/get-by-name: HTTP 200 with an answer that is not MLflow's JSON: <html> <body>"},
      {http_answer("200 OK", "application/json", R"({"experiment": {"experiment_id": "7"}, "run": 3})"),
       "no run id in the answer to runs/create"},
      {http_answer("200 OK", "application/json", R"({"experiment": {"experiment_id": 7}})"), "no experiment id"},
      {http_answer("502 Bad Gateway", "text/html", page), "HTTP 502: <html> <body>  Sign in to continue"},
  };
  for (const auto& [answer, says] : servers) {
    AnsweringServer server(answer);
    ASSERT_GT(server.port(), 0);
    const std::string uri = "http://127.0.0.1:" + std::to_string(server.port());
    const std::string secret_uri = "http://ddp:s3cret-word@127.0.0.1:" + std::to_string(server.port());
    // job.name, the run's name, ends in a byte that is not UTF-8 (a Latin-1 e acute).
    const CommandResult r = run_command(ddptrain_path() + " " + cfg + " --metrics.mlflow_uri=" + secret_uri +
                                        " --job.name=\"$(printf 'caf\\351')\" 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string warned = "warning: metrics.mlflow_uri " + uri + ": ";
    ASSERT_EQ(count_of(r.output, warned), 1u) << r.output;
    const size_t at = r.output.find(warned);
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_NE(line.find(says), std::string::npos) << line;
    EXPECT_NE(line.find("training goes on"), std::string::npos) << line;
    EXPECT_EQ(r.output.find("s3cret"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("at " + uri), std::string::npos) << r.output;
  }
}

TEST(MlflowTracking, AUriThatIsNotHttpIsAConfigError) {
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 16, 8, 5, {"job.out_dir=" + dir / "out"});
  const CommandResult r = run_command(ddptrain_path() + " " + cfg + " --metrics.mlflow_uri=127.0.0.1:5000 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("metrics.mlflow_uri = \"127.0.0.1:5000\" is not an http:// or https:// URI"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace ddp::test
