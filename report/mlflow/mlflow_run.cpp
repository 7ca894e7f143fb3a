// MlflowRun: the REST calls of MLflow's tracking API (https://mlflow.org/docs/latest/rest-api.html) on a thread.
#include "report/mlflow/mlflow_run.h"

#include "report/mlflow/rest_call.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace ddp {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* status_name(MlflowStatus s) {
  switch (s) {
    case MlflowStatus::kFinished:
      return "FINISHED";
    case MlflowStatus::kKilled:
      return "KILLED";
    case MlflowStatus::kFailed:
      break;
  }
  return "FAILED";
}

// %XX for everything but RFC 3986's unreserved characters (and '/' where a path keeps its separators).
std::string url_escape(const std::string& s, bool keep_slashes) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~' || (keep_slashes && ch == '/')) {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}

// The path of a run's artifact folder under the server's artifact proxy: "mlflow-artifacts:/1/RUN/artifacts" (or
// with a host: "mlflow-artifacts://host:port/1/RUN/artifacts") is served at /api/2.0/mlflow-artifacts/artifacts/1/RUN/
// artifacts (MLflow's mlflow/store/artifact/mlflow_artifacts_repo.py). "" for another scheme.
std::string proxied_artifact_path(const std::string& artifact_uri) {
  const std::string scheme = "mlflow-artifacts:";
  if (artifact_uri.rfind(scheme, 0) != 0) return "";
  std::string rest = artifact_uri.substr(scheme.size());
  if (rest.rfind("//", 0) == 0) {
    const size_t slash = rest.find('/', 2);
    rest = slash == std::string::npos ? "" : rest.substr(slash);
  }
  while (!rest.empty() && rest.front() == '/') rest.erase(0, 1);
  return rest;
}

// The string at `pointer` in `j`; "" when there is none or it is not a string (`j` not an object among them).
std::string text_at(const Json& j, const Json::json_pointer& pointer) {
  try {
    if (!j.contains(pointer)) return "";
    const Json& v = j.at(pointer);
    return v.is_string() ? v.get<std::string>() : "";
  } catch (const Json::exception&) {
    return "";
  }
}

// A request's body: bytes that are not UTF-8 (a path given on the command line, say) become U+FFFD.
std::string body_of(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The first `limit` bytes of `text`, cut back to a UTF-8 character's start.
std::string cut_utf8(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// `text` with its control characters (line breaks among them) as blanks: a warning is one line.
std::string one_line(std::string text) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return text;
}

// "HTTP 400: the server's message" from an MLflow error answer ({"error_code": ..., "message": ...}), on one line.
std::string http_error(long status, const std::string& body) {
  std::string message = text_at(Json::parse(body, nullptr, false), "/message"_json_pointer);
  if (message.empty()) message = body.substr(0, 200);
  return "HTTP " + std::to_string(status) + (message.empty() ? "" : ": " + one_line(message));
}

}  // namespace

std::string uri_without_userinfo(const std::string& uri) {
  const size_t scheme = uri.find("://");
  if (scheme == std::string::npos) return uri;
  const size_t host = scheme + 3;
  const size_t end = std::min(uri.find_first_of("/?#", host), uri.size());
  const size_t at = uri.rfind('@', end == 0 ? 0 : end - 1);
  if (at == std::string::npos || at < host) return uri;
  return uri.substr(0, host) + uri.substr(at + 1);
}

MlflowRun::MlflowRun(MlflowRunSpec spec, std::string resumed_run_id) : spec_(std::move(spec)) {
  while (!spec_.uri.empty() && spec_.uri.back() == '/') spec_.uri.pop_back();
  run_id_ = std::move(resumed_run_id);
  resumed_ = !run_id_.empty();
  thread_ = std::thread([this] { work(); });
}

MlflowRun::~MlflowRun() {
  if (thread_.joinable()) end(MlflowStatus::kFailed, {});
}

void MlflowRun::log(std::vector<MlflowMetric> record) {
  if (record.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ending_) return;
    if (queue_.size() >= kMaxQueuedRecords) {
      queue_.pop_front();
      ++dropped_;
    }
    ++logged_;
    if (done_) {  // the client stopped: nothing sends it
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(record));
  }
  cv_.notify_all();
}

void MlflowRun::end(MlflowStatus status, std::vector<std::string> artifacts) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ending_ = true;
    status_ = status;
    artifacts_ = std::move(artifacts);
  }
  cv_.notify_all();
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return done_; }))
      if (exit_wait_over()) {
        abandon_ = true;  // rest_call returns within ~50 ms
        break;
      }
  }
  thread_.join();
}

bool MlflowRun::exit_wait_over() {
  const auto now = Clock::now();
  if (!exit_start_) exit_start_ = now;
  const auto answered = Clock::time_point(Clock::duration(last_answer_.load()));
  return now >= *exit_start_ + kExitWait || now >= std::max(*exit_start_, answered) + kExitWaitUnanswered;
}

void MlflowRun::await_run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_cv_.wait_for(lock, std::chrono::milliseconds(50),
                            [&] { return !run_id_.empty() || !first_failure_.empty() || done_; }))
    if (exit_wait_over()) break;
}

std::string MlflowRun::run_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return run_id_;
}

std::string MlflowRun::take_first_failure() {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_taken_ || first_failure_.empty()) return "";
  failure_taken_ = true;
  return first_failure_;
}

void MlflowRun::failed(const std::string& what) {
  retry_at_ = Clock::now() + kRetryPause;
  std::lock_guard<std::mutex> lock(mu_);
  if (first_failure_.empty()) first_failure_ = uri_without_userinfo(spec_.uri) + ": " + what;
  done_cv_.notify_all();
}

bool MlflowRun::call(const std::string& method, const std::string& path, const std::string& body, Json* answer,
                     long* status, const std::string& upload) {
  RestRequest request;
  request.method = method;
  request.url = spec_.uri + path;
  request.body = body;
  request.upload_path = upload;
  request.moved = &last_answer_;
  if (!upload.empty()) request.timeout_s = 3600;  // an artifact takes what end()'s wait leaves it
  const RestReply reply = rest_call(request, abandon_);
  if (status) *status = reply.status;
  if (!reply.error.empty()) {
    failed(method + " " + path.substr(0, path.find('?')) + ": " + reply.error);
    return false;
  }
  last_answer_ = Clock::now().time_since_epoch().count();  // an error status is an answer too: the server is there
  if (reply.status != 200) {
    if (!(status && reply.status == 404))
      failed(method + " " + path.substr(0, path.find('?')) + ": " + http_error(reply.status, reply.body));
    return false;
  }
  // Every answer of the API is a JSON object, or nothing (an artifact's upload): anything else (a proxy's login
  // page) took nothing.
  Json parsed = reply.body.empty() ? Json::object() : Json::parse(reply.body, nullptr, false);
  if (!parsed.is_object()) {
    failed(method + " " + path.substr(0, path.find('?')) +
           ": HTTP 200 with an answer that is not MLflow's JSON: " + one_line(reply.body.substr(0, 200)));
    return false;
  }
  if (answer) *answer = std::move(parsed);
  return true;
}

// A resumed run is set RUNNING again; a new one needs its experiment (MLflow's experiments/get-by-name, else
// experiments/create), runs/create and its params. Each step is done once: a failed one is tried again later.
bool MlflowRun::start_run() {
  Json answer;
  if (resumed_ && artifact_uri_.empty()) {
    long status = 0;
    if (!call("GET", "/api/2.0/mlflow/runs/get?run_id=" + url_escape(run_id(), false), "", &answer, &status)) {
      if (status != 404) return false;
      std::lock_guard<std::mutex> lock(mu_);  // not on this server (any more): a new run
      run_id_.clear();
      resumed_ = false;
    } else {
      artifact_uri_ = text_at(answer, "/run/info/artifact_uri"_json_pointer);
      const Json update = {{"run_id", run_id()}, {"status", "RUNNING"}};
      if (!call("POST", "/api/2.0/mlflow/runs/update", body_of(update), nullptr)) {
        artifact_uri_.clear();
        return false;
      }
      return true;
    }
  }
  if (resumed_) return true;
  if (experiment_id_.empty()) {
    long status = 0;
    if (call("GET", "/api/2.0/mlflow/experiments/get-by-name?experiment_name=" + url_escape(spec_.experiment, false),
             "", &answer, &status)) {
      experiment_id_ = text_at(answer, "/experiment/experiment_id"_json_pointer);
    } else if (status == 404) {
      const Json create = {{"name", spec_.experiment}};
      if (!call("POST", "/api/2.0/mlflow/experiments/create", body_of(create), &answer)) return false;
      experiment_id_ = text_at(answer, "/experiment_id"_json_pointer);
    } else {
      return false;
    }
    if (experiment_id_.empty()) {
      failed("no experiment id in the server's answer for experiment \"" + spec_.experiment + "\"");
      return false;
    }
  }
  if (run_id().empty()) {
    Json create = {{"experiment_id", experiment_id_}, {"run_name", spec_.run_name}, {"start_time", now_ms()}};
    create["tags"] = Json::array();
    for (const auto& [key, value] : spec_.tags) create["tags"].push_back({{"key", key}, {"value", value}});
    if (!call("POST", "/api/2.0/mlflow/runs/create", body_of(create), &answer)) return false;
    const std::string id = text_at(answer, "/run/info/run_id"_json_pointer);
    if (id.empty()) {
      failed("no run id in the answer to runs/create");
      return false;
    }
    artifact_uri_ = text_at(answer, "/run/info/artifact_uri"_json_pointer);
    std::lock_guard<std::mutex> lock(mu_);
    run_id_ = id;
    done_cv_.notify_all();
  }
  return send_params();
}

bool MlflowRun::send_params() {
  for (size_t first = 0; first < spec_.params.size() && !params_sent_; first += kMaxParamsPerBatch) {
    Json batch = {{"run_id", run_id()}, {"params", Json::array()}};
    for (size_t i = first; i < std::min(spec_.params.size(), first + kMaxParamsPerBatch); ++i) {
      const auto& [key, value] = spec_.params[i];
      batch["params"].push_back({{"key", key}, {"value", cut_utf8(value, kMaxParamValueLength)}});
    }
    // Logging the same value again is allowed, so a batch that failed half-way is simply sent again.
    if (!call("POST", "/api/2.0/mlflow/runs/log-batch", body_of(batch), nullptr)) return false;
  }
  params_sent_ = true;
  return true;
}

bool MlflowRun::send_metrics(const std::vector<std::vector<MlflowMetric>>& records) {
  Json batch = {{"run_id", run_id()}, {"metrics", Json::array()}};
  for (const auto& record : records)
    for (const MlflowMetric& m : record)
      batch["metrics"].push_back({{"key", m.key}, {"value", m.value}, {"timestamp", m.timestamp_ms}, {"step", m.step}});
  return call("POST", "/api/2.0/mlflow/runs/log-batch", body_of(batch), nullptr);
}

void MlflowRun::work() {
  try {
    talk();
  } catch (const std::exception& e) {  // the client's own failure ends its talk, never the run
    failed(std::string("the MLflow client stopped: ") + e.what());
  }
  std::lock_guard<std::mutex> lock(mu_);
  dropped_ += in_flight_ + static_cast<int64_t>(queue_.size());
  in_flight_ = 0;
  queue_.clear();
  done_ = true;
  done_cv_.notify_all();
}

void MlflowRun::talk() {
  bool started = false;
  for (;;) {
    bool ending = false;
    std::vector<std::vector<MlflowMetric>> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Past a failure's pause: the run to start, or records to send; at the end, at once.
      const auto due = [&] { return Clock::now() >= retry_at_ && (!started || !queue_.empty()); };
      cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return ending_ || due(); });
      ending = ending_;
      if (abandon_) break;
      if (!ending && !due()) continue;
    }
    if (!started && !(started = start_run())) {
      if (ending) break;
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t metrics = 0;
      while (!queue_.empty() && (batch.empty() || metrics + queue_.front().size() <= kMaxMetricsPerBatch)) {
        metrics += queue_.front().size();
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (!batch.empty()) {
      in_flight_ = static_cast<int64_t>(batch.size());
      const bool sent = send_metrics(batch);
      in_flight_ = 0;
      if (!sent) {
        dropped_ += static_cast<int64_t>(batch.size());
        if (ending) break;
      }
      continue;
    }
    if (ending) {
      finish(status_, artifacts_);
      break;
    }
  }
}

// The artifacts first, the status last: a run whose upload was cut short is not marked as ended.
void MlflowRun::finish(MlflowStatus status, const std::vector<std::string>& artifacts) {
  const std::string folder = proxied_artifact_path(artifact_uri_);
  bool listed = false;
  for (const std::string& path : artifacts) {
    if (!std::filesystem::is_regular_file(path)) continue;
    if (folder.empty()) {
      if (!listed)
        failed("the run's artifact store " + artifact_uri_ +
               " is not the server's artifact proxy (mlflow server --serve-artifacts): no artifacts uploaded");
      listed = true;
      continue;
    }
    const std::string name = std::filesystem::path(path).filename().string();
    if (!call("PUT", "/api/2.0/mlflow-artifacts/artifacts/" + url_escape(folder + "/" + name, true), "", nullptr,
              nullptr, path))
      return;
  }
  const Json update = {{"run_id", run_id()}, {"status", status_name(status)}, {"end_time", now_ms()}};
  call("POST", "/api/2.0/mlflow/runs/update", body_of(update), nullptr);
}

}  // namespace ddp
