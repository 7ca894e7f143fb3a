// MetricsEndpoint: metrics.listen's HTTP endpoint on rank 0: /metrics in Prometheus' text exposition format and
// /healthz, read-only.
#pragma once

#include "report/metrics_table.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace ddp {

// Serves, on one thread, one connection at a time:
// - GET /metrics: the last train and eval records' numeric fields as gauges ddptrain_train_<field> and
//   ddptrain_eval_<field> (the metrics table's fields and docs: docs/metrics.md; units spelled out: _per_s as
//   _per_second, _s as _seconds, _mib as _mebibytes), ddptrain_step (the last optimizer
//   step), ddptrain_last_step_age_seconds and ddptrain_healthy, in the text exposition format 0.0.4
//   (https://prometheus.io/docs/instrumenting/exposition_formats/);
// - GET /healthz: 200 "ok", or 503 once no step has ended for `stall_s` seconds (the first step's clock starts with
//   the endpoint).
// Nothing a request says changes the run: other paths are 404, other methods 405, a request whose head exceeds
// kMaxRequestBytes is 431, and a client gets kRequestTimeout to send its request before it is closed.
class MetricsEndpoint {
 public:
  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr std::chrono::milliseconds kRequestTimeout{2000};

  // Listens on HOST:PORT (`listen`, as split_host_port splits it; PORT 0 = a free one) on that address only.
  // Throws std::runtime_error naming metrics.listen when the address does not resolve or cannot be bound.
  MetricsEndpoint(const std::string& listen, double stall_s);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }
  // An optimizer step ended (every step: an atomic store each).
  void step_done(int64_t step);
  // A train or eval record was written: its numeric fields replace that kind's gauges.
  void publish(RecordKind kind, const MetricValues& values);

  // The /metrics page and whether /healthz is ok, as of now.
  std::string metrics_page() const;
  bool healthy() const;

 private:
  void serve();
  void answer(int client) const;
  double step_age_s() const;

  double stall_s_;
  int listen_fd_ = -1, wake_fd_ = -1, port_ = 0;
  std::atomic<int64_t> step_{0};
  std::atomic<int64_t> last_step_ns_;  // steady_clock, when the last step ended (or the endpoint started)
  mutable std::mutex mu_;
  std::string train_text_, eval_text_;  // the gauges of the last record of each kind, exposition lines
  std::thread thread_;
};

}  // namespace ddp
