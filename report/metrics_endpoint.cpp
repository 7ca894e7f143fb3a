// metrics.listen's endpoint: a listening socket, one serving thread, the exposition text.
#include "report/metrics_endpoint.h"

#include "base/host_port.h"
#include "base/json_record.h"
#include "base/thread_name.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <variant>

namespace ddp {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A sample value as Prometheus reads it (Go's ParseFloat: NaN, +Inf, -Inf, decimals).
std::string sample_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return json_number(v);
}

// A metric name of the exposition format ([a-zA-Z_:][a-zA-Z0-9_:]*) from a metrics.jsonl field, its unit spelled
// out as Prometheus' naming conventions ask (samples_per_s -> samples_per_second, time_data_s -> time_data_seconds,
// rss_peak_mib -> rss_peak_mebibytes), and "_total", which they keep for counters, said as what it counts (eval's
// total: the samples evaluated).
std::string metric_name(const std::string& prefix, const std::string& field) {
  std::string out = prefix;
  for (const char c : field) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  for (const auto& [abbreviated, spelled] : {std::pair<std::string, std::string>{"_per_s", "_per_second"},
                                             {"_s", "_seconds"},
                                             {"_mib", "_mebibytes"},
                                             {"_total", "_samples"}})
    if (out.size() > abbreviated.size() &&
        out.compare(out.size() - abbreviated.size(), abbreviated.size(), abbreviated) == 0)
      return out.substr(0, out.size() - abbreviated.size()) + spelled;
  return out;
}

// HELP text: backslash and line feed escaped.
std::string help_text(const std::string& doc) {
  std::string out;
  for (const char c : doc) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string gauge(const std::string& name, const std::string& doc, const std::string& value) {
  return "# HELP " + name + " " + help_text(doc) + "\n# TYPE " + name + " gauge\n" + name + " " + value + "\n";
}

void send_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away or stopped reading (SO_SNDTIMEO): its loss
    sent += static_cast<size_t>(n);
  }
}

void reply(int fd, int code, const char* reason, const std::string& body, bool head_only,
           const std::string& content_type = "text/plain; charset=utf-8", const std::string& extra = "") {
  send_all(fd, "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + content_type +
                   "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n" + extra + "\r\n" +
                   (head_only ? "" : body));
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(const std::string& listen, double stall_s)
    : stall_s_(stall_s), last_step_ns_(now_ns()) {
  const auto address = split_host_port(listen);
  if (!address) throw std::runtime_error("metrics.listen = \"" + listen + "\" is not HOST:PORT");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address->second);
  if (const int rc = getaddrinfo(address->first.c_str(), port.c_str(), &hints, &found); rc != 0)
    throw std::runtime_error("metrics.listen = \"" + listen + "\": cannot resolve " + address->first + ": " +
                             gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 16) == 0) {
      listen_fd_ = fd;
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) throw std::runtime_error("metrics.listen = \"" + listen + "\": cannot listen there: " + why);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    ::close(listen_fd_);
    throw std::runtime_error(std::string("metrics.listen: eventfd: ") + std::strerror(errno));
  }
  thread_ = std::thread([this] { serve(); });
}

MetricsEndpoint::~MetricsEndpoint() {
  const uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) < 0) {
  }  // the thread then sees the listening socket close below at the latest
  if (thread_.joinable()) thread_.join();
  ::close(wake_fd_);
  ::close(listen_fd_);
}

void MetricsEndpoint::step_done(int64_t step) {
  step_.store(step, std::memory_order_relaxed);
  last_step_ns_.store(now_ns(), std::memory_order_relaxed);
}

void MetricsEndpoint::publish(RecordKind kind, const MetricValues& values) {
  const std::string prefix = kind == RecordKind::kTrain ? "ddptrain_train_" : "ddptrain_eval_";
  std::string text;
  for (const auto& [row, value] : values) {
    if (std::holds_alternative<std::string>(value)) continue;
    const double v = std::holds_alternative<int64_t>(value) ? static_cast<double>(std::get<int64_t>(value))
                                                            : std::get<double>(value);
    text += gauge(metric_name(prefix, row->field), row->doc, sample_value(v));
  }
  std::lock_guard<std::mutex> lock(mu_);
  (kind == RecordKind::kTrain ? train_text_ : eval_text_) = std::move(text);
}

double MetricsEndpoint::step_age_s() const {
  return static_cast<double>(now_ns() - last_step_ns_.load(std::memory_order_relaxed)) / 1e9;
}

bool MetricsEndpoint::healthy() const { return step_age_s() < stall_s_; }

std::string MetricsEndpoint::metrics_page() const {
  std::string page = gauge("ddptrain_step", "The last optimizer step that ended.",
                           std::to_string(step_.load(std::memory_order_relaxed)));
  page += gauge("ddptrain_last_step_age_seconds",
                "Seconds since the last optimizer step ended (since the endpoint started, before the first).",
                sample_value(step_age_s()));
  page += gauge("ddptrain_healthy", "1 while an optimizer step ended within metrics.stall_s seconds, else 0.",
                healthy() ? "1" : "0");
  std::lock_guard<std::mutex> lock(mu_);
  return page + train_text_ + eval_text_;
}

void MetricsEndpoint::serve() {
  name_this_thread("ddp-metrics");
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    answer(client);
    ::close(client);
  }
}

void MetricsEndpoint::answer(int client) const {
  const timeval send_timeout{static_cast<time_t>(kRequestTimeout.count() / 1000), 0};
  setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
  const auto deadline = std::chrono::steady_clock::now() + kRequestTimeout;
  std::string request;
  char buffer[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.find("\n\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes) {
      reply(client, 431, "Request Header Fields Too Large", "request head over 8192 bytes\n", false);
      return;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{client, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return;  // too slow: closed
    const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
    if (n <= 0) return;
    request.append(buffer, static_cast<size_t>(n));
  }
  // The request line: METHOD SP TARGET SP HTTP-VERSION.
  const std::string line = request.substr(0, request.find_first_of("\r\n"));
  const size_t space1 = line.find(' '), space2 = line.rfind(' ');
  if (space1 == std::string::npos || space2 == space1 || line.compare(space2 + 1, 5, "HTTP/") != 0) {
    reply(client, 400, "Bad Request", "not an HTTP request\n", false);
    return;
  }
  const std::string method = line.substr(0, space1);
  std::string target = line.substr(space1 + 1, space2 - space1 - 1);
  target = target.substr(0, target.find('?'));
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    reply(client, 405, "Method Not Allowed", "read-only: GET or HEAD\n", false, "text/plain; charset=utf-8",
          "Allow: GET, HEAD\r\n");
  } else if (target == "/metrics") {
    reply(client, 200, "OK", metrics_page(), head, "text/plain; version=0.0.4; charset=utf-8");
  } else if (target == "/healthz") {
    if (healthy())
      reply(client, 200, "OK", "ok\n", head);
    else
      reply(client, 503, "Service Unavailable",
            "stalled: no optimizer step for " + json_number(std::floor(step_age_s())) + " s\n", head);
  } else {
    reply(client, 404, "Not Found", "/metrics or /healthz\n", head);
  }
}

}  // namespace ddp
