// MlflowRun: one run on an MLflow tracking server, fed through its REST API by a background thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ddp {

struct MlflowMetric {
  std::string key;
  double value = 0;
  int64_t timestamp_ms = 0, step = 0;
};

// What a new run is made of.
struct MlflowRunSpec {
  std::string uri;         // the tracking server: "http://host:port" (a path prefix and user:password@ allowed)
  std::string experiment;  // found by name, made when absent
  std::string run_name;
  std::vector<std::pair<std::string, std::string>> params, tags;
};

// `uri` without a "user:password@" part, as it is shown in messages and logged as a param.
std::string uri_without_userinfo(const std::string& uri);

// MLflow's RunStatus values a run ends with.
enum class MlflowStatus { kFinished, kFailed, kKilled };

// Talks to the server on a thread of its own, so that the training thread never waits on the network:
// - at start, continues `resumed_run_id` (set RUNNING again) when given, else gets or creates the experiment, creates
//   the run (run name, tags) and logs the params (MLflow's runs/log-batch, at most kMaxParamsPerBatch a request;
//   values cut to kMaxParamValueLength);
// - log() queues a record's metrics (at most kMaxQueuedRecords records: the oldest is dropped, and counted, when
//   full); the thread sends them with runs/log-batch, at most kMaxMetricsPerBatch a request;
// - a request that fails (no answer within its libcurl timeouts, or an error status) drops its records and pauses
//   the thread for kRetryPause; the first failure is kept for the caller to report;
// - end() uploads the artifacts through the server's artifact proxy (mlflow server --serve-artifacts:
//   /api/2.0/mlflow-artifacts/artifacts/...) and sets the run's status; the exit wait (from the first of await_run()
//   and end()) lasts at most kExitWait, and ends after kExitWaitUnanswered without an answer from the server or a
//   byte moved (a server that does not answer costs the run that long); what is left then is abandoned;
// - an answer that is neither empty nor the JSON the API describes fails its request, as an error status does.
// Limits from MLflow's mlflow/utils/validation.py.
class MlflowRun {
 public:
  static constexpr size_t kMaxParamsPerBatch = 100;
  static constexpr size_t kMaxMetricsPerBatch = 1000;
  static constexpr size_t kMaxParamValueLength = 6000;
  static constexpr size_t kMaxQueuedRecords = 1000;
  static constexpr std::chrono::milliseconds kRetryPause{5000};
  static constexpr std::chrono::milliseconds kExitWait{10000};
  static constexpr std::chrono::milliseconds kExitWaitUnanswered{1000};

  MlflowRun(MlflowRunSpec spec, std::string resumed_run_id);
  ~MlflowRun();  // ends the run as FAILED unless end() was called
  MlflowRun(const MlflowRun&) = delete;
  MlflowRun& operator=(const MlflowRun&) = delete;

  // Queues one record's metrics; never blocks on the network.
  void log(std::vector<MlflowMetric> record);
  // Waits, within the exit wait, until the run is made (or a request failed): the run's last checkpoint is about to
  // be written and should name it.
  void await_run();
  // Uploads `artifacts` (the files that exist, under their own names) and sets `status`; returns within the exit wait.
  void end(MlflowStatus status, std::vector<std::string> artifacts);

  std::string run_id() const;  // "" until the run is created (the resumed one's at once)
  // The first failed request, once: "URI: what failed" (the URI without userinfo; "" after that, and before any
  // failure).
  std::string take_first_failure();
  int64_t records_logged() const { return logged_; }  // queued by log()
  int64_t records_dropped() const { return dropped_; }

 private:
  void work();  // the thread: talk(), then what is left in the queue dropped
  void talk();
  bool start_run();
  bool send_params();
  bool send_metrics(const std::vector<std::vector<MlflowMetric>>& records);
  void finish(MlflowStatus status, const std::vector<std::string>& artifacts);
  // One request to the server (path under the URI); false unless it answered 200 with a JSON object or nothing,
  // failed() but where `status` is asked for and the answer is 404 (the caller decides). `answer`: the JSON object
  // (empty for nothing); `status`: the answer's HTTP status, 0 without one.
  bool call(const std::string& method, const std::string& path, const std::string& body, nlohmann::json* answer,
            long* status = nullptr, const std::string& upload = "");
  void failed(const std::string& what);
  bool exit_wait_over();  // the exit wait starts at its first call

  MlflowRunSpec spec_;
  std::string experiment_id_, artifact_uri_;
  bool resumed_ = false, params_sent_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::string run_id_;  // guarded by mu_
  std::deque<std::vector<MlflowMetric>> queue_;
  bool ending_ = false, done_ = false;
  MlflowStatus status_ = MlflowStatus::kFailed;
  std::vector<std::string> artifacts_;
  std::string first_failure_;
  bool failure_taken_ = false;
  // steady_clock ticks when the server last answered (whatever its status) or a byte last moved
  std::atomic<int64_t> last_answer_{0};
  std::atomic<bool> abandon_{false};
  std::atomic<int64_t> logged_{0}, dropped_{0};
  int64_t in_flight_ = 0;  // records of the request being sent (the thread's; read once it is done)
  std::chrono::steady_clock::time_point retry_at_{};
  std::optional<std::chrono::steady_clock::time_point> exit_start_;
  std::thread thread_;
};

}  // namespace ddp
