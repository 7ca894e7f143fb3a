// Reporter: the console lines, metrics.jsonl records and TensorBoard scalars of a run (both from metrics_table.h).
#include "report/reporter.h"

#include "base/atomic_file.h"
#include "base/json_record.h"
#include "base/number_text.h"
#include "report/gpu_memory.h"
#include "report/jsonl_writer.h"
#include "report/metrics_endpoint.h"
#include "report/metrics_table.h"
#include "report/mlflow_records.h"
#include "report/progress.h"
#include "report/tensorboard/tensorboard.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

namespace ddp {
namespace {

// dist.allreduce's path as the banner says it.
std::string allreduce_text(const std::string& path) {
  if (path == "shm") return "shared memory";
  if (path == "hierarchical") return "hierarchical (shared memory in each node, gloo between nodes)";
  return path;
}

std::string banner_text(const RunFacts& f) {
  std::string out = "ddptrain: job " + f.job + " | world " + std::to_string(f.world_size) + " | backend " + f.backend +
                    " | device " + f.device + (f.gpu.empty() ? "" : " (" + f.gpu + ")");
  if (f.distributed)
    out += " | all-reduce " + allreduce_text(f.allreduce) +
           (f.allreduce_note.empty() ? "" : " (shared memory not used: " + f.allreduce_note + ")") +
           (f.grad_compression.empty() ? "" : ", gradients as " + f.grad_compression);
  else if (!f.grad_compression.empty())
    out += " | dist.grad_compression off: a world of one all-reduces no gradients";
  if (!f.rendezvous.empty()) out += "\n  rendezvous " + f.rendezvous;
  out += "\n  model " + f.model + " (" + std::to_string(f.parameters) + " parameters)" +
         (f.batchnorm.empty() ? "" : " | " + f.batchnorm) + " | data " + f.dataset + " train " +
         std::to_string(f.train_size) + " test " + std::to_string(f.test_size);
  if (!f.transforms.empty()) out += "\n  transforms " + f.transforms;
  out += "\n  batch " + std::to_string(f.batch_size) + " per rank x " + std::to_string(f.world_size) + " ranks x " +
         std::to_string(f.grad_accum_steps) +
         " accumulation = " + std::to_string(f.batch_size * f.world_size * f.grad_accum_steps) + " per step | " +
         std::to_string(f.steps_per_epoch) + " steps/epoch | amp " + f.amp +
         (f.cudnn_benchmark.empty() ? "" : " | " + f.cudnn_benchmark);
  if (!f.classes.empty()) out += " | " + std::to_string(f.classes.size()) + " classes";
  out += "\n  outputs in " + f.out_dir + (f.checkpoints.empty() ? "" : " | checkpoints in " + f.checkpoints);
  if (!f.init_from_note.empty()) out += "\n  init_from: " + f.init_from_note;
  return out;
}

// "eval LABEL: loss ... accuracy ... (correct/total) [top-5 ...]"
std::string eval_text(const EvalRecord& e, const std::string& label) {
  const std::string top5 = e.correct_top5 >= 0
                               ? " top-5 " + number_text("%.4f", e.accuracy_top5) + " (" +
                                     std::to_string(e.correct_top5) + "/" + std::to_string(e.total) + ")"
                               : "";
  return "eval " + label + ": loss " + number_text("%.4f", e.loss) + " accuracy " + number_text("%.4f", e.accuracy) +
         " (" + std::to_string(e.correct) + "/" + std::to_string(e.total) + ")" + top5 +
         (std::isnan(e.accuracy_ema) ? "" : " | EMA accuracy " + number_text("%.4f", e.accuracy_ema));
}

}  // namespace

Reporter::Reporter(const MetricsConfig& cfg, std::string out_dir, c10::Device device, ReportingRanks ranks,
                   SumOverRanks sum, MaxOverRanks max)
    : cfg_(cfg),
      out_dir_(std::move(out_dir)),
      device_(device),
      ranks_(std::move(ranks)),
      rank_zero_(ranks_.rank == 0),
      sum_(std::move(sum)),
      max_(std::move(max)),
      progress_(std::make_unique<Progress>(cfg.progress, rank_zero_)),
      start_(std::chrono::steady_clock::now()),
      interval_start_(start_) {
  if (rank_zero_ && !cfg.listen.empty()) endpoint_ = std::make_unique<MetricsEndpoint>(cfg.listen, cfg.stall_s);
}

Reporter::~Reporter() {
  try {
    end_run(MlflowStatus::kFailed, false);  // a run that ends otherwise than by end_run failed
  } catch (const std::exception&) {
  }
}

void Reporter::message(const std::string& line) { progress_->message(line); }
void Reporter::warning(const std::string& line) { progress_->warning(line); }
void Reporter::banner(const RunFacts& facts) {
  classes_ = facts.classes;
  progress_->message(banner_text(facts));
  if (endpoint_)
    progress_->message("  metrics.listen: http://" + cfg_.listen.substr(0, cfg_.listen.rfind(':')) + ":" +
                       std::to_string(endpoint_->port()) + "/metrics and /healthz");
}

void Reporter::open_files(std::optional<int64_t> resumed_at, bool keep_records) {
  if (!rank_zero_) return;
  std::filesystem::create_directories(out_dir_);
  const std::string path = out_dir_ + "/metrics.jsonl";
  if (!resumed_at && !keep_records) std::filesystem::remove(path);
  // What an interrupted run logged after the checkpoint a resume continues from is dropped, as TensorBoard drops it;
  // records kept lose an unfinished last line.
  if (resumed_at || keep_records) drop_records_after(path, resumed_at.value_or(INT64_MAX));
  jsonl_ = std::make_unique<JsonlWriter>(path);
  if (cfg_.tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>(out_dir_ + "/tensorboard");
  // The points an interrupted run logged after the checkpoint it resumes from are orphans: TensorBoard drops them.
  if (tensorboard_ && resumed_at) tensorboard_->purge_from(*resumed_at + 1);
  if (!classes_.empty()) write_classes();
  if (mlflow_spec_) mlflow_ = std::make_unique<MlflowRun>(*mlflow_spec_, resumed_at ? mlflow_resumed_id_ : "");
}

void Reporter::track_in_mlflow(MlflowRunSpec spec) {
  if (rank_zero_) mlflow_spec_ = std::move(spec);
}

void Reporter::state_dict(c10::impl::GenericDict& out) const {
  // A run resumed without metrics.mlflow_uri keeps the id for a later one that sets it again.
  const std::string id = mlflow_ ? mlflow_->run_id() : mlflow_resumed_id_;
  if (!id.empty()) out.insert("mlflow_run_id", id);
}

void Reporter::load_state_dict(const c10::impl::GenericDict& state) {
  const auto it = state.find(std::string("mlflow_run_id"));
  if (it != state.end() && it->value().isString()) mlflow_resumed_id_ = it->value().toStringRef();
}

// One warning for the first request that failed; the records' fate is told at the end.
void Reporter::warn_of_mlflow_failure() {
  const std::string failure = mlflow_->take_first_failure();
  if (!failure.empty())
    warning("metrics.mlflow_uri " + failure + " (training goes on; what MLflow does not take is dropped)");
}

void Reporter::settle_mlflow_run() {
  if (mlflow_) mlflow_->await_run();
}

void Reporter::end_run(MlflowStatus status, bool outputs) {
  if (!mlflow_) return;
  std::vector<std::string> artifacts;
  if (outputs)
    for (const char* name : {"model.pt", "model.safetensors", "config.json", "metrics.jsonl"})
      artifacts.push_back(out_dir_ + "/" + name);
  mlflow_->end(status, artifacts);
  warn_of_mlflow_failure();
  const int64_t dropped = mlflow_->records_dropped(), logged = mlflow_->records_logged();
  const std::string run = mlflow_->run_id();
  const std::string where = "MLflow run " + (run.empty() ? std::string("(not made)") : run) + " at " +
                            uri_without_userinfo(mlflow_spec_->uri);
  if (dropped > 0)
    warning(where + ": " + std::to_string(dropped) + " of " + std::to_string(logged) + " records dropped");
  else
    message(where + ": " + std::to_string(logged) + " records logged");
  mlflow_.reset();
}

// classes.json: torchvision's ImageFolder.classes and class_to_idx, written whole or not at all.
void Reporter::write_classes() const {
  nlohmann::ordered_json doc;
  doc["classes"] = classes_;
  for (size_t i = 0; i < classes_.size(); ++i) doc["class_to_idx"][classes_[i]] = i;
  const std::string text = doc.dump(1) + "\n";
  write_file_atomic(out_dir_ + "/classes.json", std::vector<char>(text.begin(), text.end()));
}

void Reporter::start() {
  start_ = interval_start_ = std::chrono::steady_clock::now();
  interval_outside_s_ = 0;
}

bool Reporter::logs_at(const StepRecord& s) const {
  return s.step % cfg_.log_every_steps == 0 || s.step >= s.total_steps || s.ends_epoch;
}

void Reporter::step(const StepRecord& s) {
  progress_->on_step(s);
  if (endpoint_) endpoint_->step_done(s.step);
  interval_loss_ += s.loss_sum;
  interval_correct_ += static_cast<double>(s.correct);
  interval_samples_ += static_cast<double>(s.samples);
  interval_time_ += s.time;
  ++interval_steps_;
  if (!logs_at(s)) return;
  std::vector<double> v = {interval_loss_, interval_correct_, interval_samples_,
                           static_cast<double>(std::max<int64_t>(s.bad_samples, 0))};
  const size_t slots = v.size();
  const RankInterval mine{interval_time_ / static_cast<double>(interval_steps_), peak_rss_mib()};
  const std::vector<double> own = rank_slots(mine, ranks_.rank, ranks_.world_size);
  v.insert(v.end(), own.begin(), own.end());
  const std::vector<double> r = sum_(v);
  StepRecord logged = s;
  if (s.bad_samples >= 0) logged.bad_samples = static_cast<int64_t>(r[3]);  // every rank's
  logged.loss = r[0] / r[2];
  logged.accuracy = r[1] / r[2];
  logged.samples_per_s = r[2] / std::max(seconds_since(interval_start_) - interval_outside_s_, 1e-9);
  logged.samples = static_cast<int64_t>(r[2]);
  const std::optional<double> gpu_mib = gpu_peak_mib();  // collective on CUDA
  total_samples_ += r[2];
  const IntervalSplit split = split_of(from_rank_slots(r.data() + slots, ranks_.world_size));
  write_train(logged, split, gpu_mib, seconds_since(start_));
  progress_->on_log(logged);
  interval_loss_ = interval_correct_ = interval_samples_ = 0;
  interval_time_ = {};
  interval_steps_ = 0;
  interval_outside_s_ = 0;
  interval_start_ = std::chrono::steady_clock::now();
}

IntervalSplit Reporter::split_of(const std::vector<RankInterval>& ranks) {
  IntervalSplit split;
  split.mean = mean_over_ranks(ranks);
  split.slowest = slowest_rank(ranks);
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i].rss_peak_mib > split.rss_peak_mib) {
      split.rss_peak_mib = ranks[i].rss_peak_mib;
      split.rss_peak_rank = static_cast<int64_t>(i);
    }
  last_split_ = split;
  if (straggler_watch_.observe(split.slowest)) {
    const Straggler& st = *split.slowest;
    warning("straggler: " + rank_place(st.rank) + " has been " + number_text("%.0f", (st.ratio - 1) * 100) +
            "% slower than the median rank for " + std::to_string(StragglerWatch::kIntervals) +
            " log intervals in a row, most in " + st.phase + " (+" + number_text("%.3g", st.excess_s) +
            " s per step; the other ranks wait for it in the gradient all-reduce)");
  }
  return split;
}

std::string Reporter::rank_place(int64_t rank) const {
  const auto i = static_cast<size_t>(rank);
  return "rank " + std::to_string(rank) + (i < ranks_.places.size() ? " (" + ranks_.places[i] + ")" : "");
}

void Reporter::end_epoch() { progress_->end_epoch(); }

void Reporter::set_flops_per_sample(double flops) {
  flops_per_sample_ = flops;
  progress_->message("FLOPs: " + number_text("%.6g", flops / 1e9) +
                     " GFLOP per training sample (forward and backward, counted as "
                     "torch.utils.flop_counter.FlopCounterMode counts them)");
}

double Reporter::tflops(double samples_per_s) const { return flops_per_sample_ * samples_per_s / 1e12; }

void Reporter::set_device_peak(const std::string& gpu_name, MathPrecision precision) {
  const std::optional<DevicePeak> peak = peak_tflops(gpu_name, precision);
  if (!peak) {
    progress_->message("MFU: no peak FLOP/s known for " + gpu_name + ": train records carry no mfu");
    return;
  }
  peak_tflops_ = peak->tflops;
  progress_->message("MFU against the " + peak->device + "'s dense " + precision_name(precision) + " peak of " +
                     number_text("%.6g", peak->tflops) + " TFLOP/s per GPU");
}

std::optional<double> Reporter::mfu(double samples_per_s) const {
  if (flops_per_sample_ <= 0 || peak_tflops_ <= 0) return std::nullopt;
  return tflops(samples_per_s) / (peak_tflops_ * static_cast<double>(ranks_.world_size));
}

void Reporter::eval(const EvalRecord& e, const std::string& label) {
  last_eval_ = e;
  write_eval(e, seconds_since(start_));
  progress_->message(eval_text(e, label));
}

std::optional<double> Reporter::gpu_peak_mib() {
  const auto peak = peak_gpu_memory_bytes(device_);
  if (!peak) return std::nullopt;  // the same on every rank: all run on CPU or all on CUDA
  return max_(static_cast<double>(*peak)) / (1 << 20);
}

void Reporter::write_train(const StepRecord& s, const IntervalSplit& split, std::optional<double> gpu_mib,
                           double wall_s) {
  const std::optional<double> flops =
      flops_per_sample_ > 0 ? std::optional<double>(tflops(s.samples_per_s)) : std::nullopt;
  write_record(train_values({s, split, gpu_mib, flops, mfu(s.samples_per_s), wall_s}), s.step);
}

void Reporter::write_eval(const EvalRecord& e, double wall_s) { write_record(eval_values({e, wall_s}), e.step); }

// metrics.jsonl's line and TensorBoard's scalars of one record: each the metrics table's, in its order.
void Reporter::write_record(const MetricValues& values, int64_t step) {
  if (endpoint_ && !values.empty()) endpoint_->publish(values.front().first->kind, values);
  if (jsonl_) {
    JsonRecord r;
    for (const auto& field : values) std::visit([&](const auto& v) { r.add(field.first->field, v); }, field.second);
    jsonl_->write(r);
  }
  if (mlflow_) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    mlflow_->log(mlflow_metrics(values, step, std::chrono::duration_cast<std::chrono::milliseconds>(now).count()));
    warn_of_mlflow_failure();
  }
  if (!tensorboard_) return;
  for (const auto& field : values) {
    if (!field.first->tag) continue;
    const MetricValue& v = field.second;
    tensorboard_->add_scalar(
        field.first->tag,
        std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v)) : std::get<double>(v), step);
  }
}

std::string Reporter::summary(const RunEnd& end) {
  const double wall_s = seconds_since(start_);
  const std::optional<double> gpu_mib = gpu_peak_mib();  // collective on CUDA
  std::string out = "summary";
  auto row = [&](const char* name, const std::string& value) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "  %-22s %s", name, value.c_str());
    out += std::string("\n") + buf;
  };
  const EvalRecord& e = last_eval_;
  row("final eval accuracy",
      number_text("%.4f", e.accuracy) + " (best " + number_text("%.4f", end.best_accuracy) + ")");
  if (e.correct_top5 >= 0) row("final eval top-5", number_text("%.4f", e.accuracy_top5));
  if (!std::isnan(e.accuracy_ema)) row("final eval EMA", number_text("%.4f", e.accuracy_ema));
  row("epochs done / steps", std::to_string(end.epochs_done) + " / " + std::to_string(end.steps));
  if (!end.ended_by.empty()) row("ended by", end.ended_by);
  if (!end.world_sizes.empty()) row("world sizes", end.world_sizes);
  row("wall time", number_text("%.1f s", wall_s));
  const double mean_samples_per_s = total_samples_ / std::max(wall_s, 1e-9);
  row("mean samples/s", number_text("%.0f", mean_samples_per_s));
  if (flops_per_sample_ > 0) row("mean TFLOP/s", number_text("%.4g", tflops(mean_samples_per_s)));
  if (const auto m = mfu(mean_samples_per_s)) row("mean MFU", number_text("%.3f", *m));
  row("skipped AMP steps", std::to_string(end.skipped_steps));
  if (end.nonfinite_skips >= 0) row("skipped non-finite", std::to_string(end.nonfinite_skips));
  if (end.bad_samples >= 0)  // the same on every rank, so every rank takes part in the sum
    row("bad samples replaced", number_text("%.0f", sum_({static_cast<double>(end.bad_samples)})[0]));
  if (gpu_mib) row("peak GPU memory", number_text("%.0f MiB (max over ranks)", *gpu_mib));
  if (last_split_)
    row("peak RSS", number_text("%.0f MiB", last_split_->rss_peak_mib) + " (max over ranks: rank " +
                        std::to_string(last_split_->rss_peak_rank) + ")");
  row("checkpoints written", std::to_string(end.checkpoints_written));
  row("model", end.model_path);
  return out;
}

}  // namespace ddp
