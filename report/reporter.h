// Reporter: what rank 0 tells of a run (console, metrics.jsonl, TensorBoard) from one step and one eval record.
#pragma once

#include "config/config.h"
#include "report/device_peak.h"
#include "report/metrics_table.h"
#include "report/mlflow/mlflow_run.h"
#include "report/phase_times.h"
#include "report/records.h"

#include <ATen/core/Dict.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

class JsonlWriter;
class MetricsEndpoint;
class Progress;
class TensorBoardWriter;

// What the setup banner shows of a run about to start.
struct RunFacts {
  std::string job, backend, device, gpu;  // gpu: name and memory, "" on CPU
  int64_t world_size = 1;
  bool distributed = false;
  std::string allreduce, allreduce_note;
  std::string rendezvous;           // "host:port (where they came from)" when distributed
  std::string grad_compression;     // the dtype gradients travel in (dist.grad_compression), "" when uncompressed
  std::string model, dataset, amp;  // amp: the autocast dtype, or "off"
  std::string transforms;           // the splits' per-sample transform lists, "" without them
  std::string cudnn_benchmark;      // "cudnn.benchmark on (auto)", ...; "" off CUDA
  std::string batchnorm;            // how BatchNorm layers normalise in training; "" for a model without them
  int64_t parameters = 0, train_size = 0, test_size = 0;
  int64_t batch_size = 0, grad_accum_steps = 1, steps_per_epoch = 0;
  std::string out_dir, init_from_note;
  std::string checkpoints;           // where checkpoints are written ("" when the run writes none)
  std::vector<std::string> classes;  // class names by label, written to out_dir/classes.json (image folders)
};

// How a training run ended, for the summary.
struct RunEnd {
  int64_t steps = 0, epochs_done = 0;
  double best_accuracy = 0;
  int64_t skipped_steps = 0;     // by the loss scaler, in this run
  int64_t bad_samples = -1;      // unreadable training samples replaced in this run, this rank; -1: not read per sample
  int64_t nonfinite_skips = -1;  // steps skipped for non-finite gradients in this run; -1: they stop the run
  int64_t checkpoints_written = 0;
  std::string model_path;
  std::string world_sizes;  // which steps ran on how many ranks, when that changed on a resume ("" otherwise)
  std::string ended_by;     // which of training.epochs and max_steps ended the run, when both are set ("" otherwise)
};

// Which rank a Reporter runs on, of how many, and where ranks run ("host h, pid 123", by rank; may be shorter than the
// world, or empty).
struct ReportingRanks {
  int64_t rank = 0, world_size = 1;
  std::vector<std::string> places;
};

class Reporter {
 public:
  // All-reduces the Reporter asks for at its log points, in the order it asks (every rank calls step() alike).
  using SumOverRanks = std::function<std::vector<double>(const std::vector<double>&)>;
  using MaxOverRanks = std::function<double(double)>;

  // Rank 0 speaks (console and files); every rank reduces alike. `device` is the run's (a CUDA run reports the
  // caching allocator's peak, max over ranks).
  Reporter(const MetricsConfig& cfg, std::string out_dir, c10::Device device, ReportingRanks ranks, SumOverRanks sum,
           MaxOverRanks max);
  ~Reporter();

  // The console: a line of its own (the live bar cleared first) unless progress is off, and "warning: " lines on
  // stderr on rank 0 whatever the display mode.
  void message(const std::string& line);
  void warning(const std::string& line);
  void banner(const RunFacts& facts);

  // Opens metrics.jsonl (appended to by a resumed run, and with `keep_records`, replaced otherwise) and, with
  // metrics.tensorboard, an event file; a run resumed at step N has TensorBoard drop what an interrupted run logged
  // after N. Writes classes.json when the banner's facts named classes.
  void open_files(std::optional<int64_t> resumed_at, bool keep_records = false);
  // metrics.mlflow_uri: rank 0 logs the run to MLflow (mlflow_records.h) from open_files() on; call before it.
  void track_in_mlflow(MlflowRunSpec spec);
  // Checkpoint entry "mlflow_run_id": rank 0's MLflow run, once the server has made it; a resumed run logs into it.
  void state_dict(c10::impl::GenericDict& out) const;
  void load_state_dict(const c10::impl::GenericDict& state);
  // The checkpoint about to be written is the run's last (at its end, or at a stop): waits, within MlflowRun's exit
  // wait, for the MLflow run to be made, so that the checkpoint names it.
  void settle_mlflow_run();
  // The MLflow run ends with `status` (with `outputs`, job.out_dir's model.pt, model.safetensors, config.json and
  // metrics.jsonl are uploaded first), waiting at most MlflowRun's exit wait; says how many records did not reach
  // it. A Reporter that goes without it ends the run FAILED.
  void end_run(MlflowStatus status, bool outputs);
  // Training (or an evaluation alone) starts now: wall time and throughput count from here.
  void start();
  // Every optimizer step, on every rank: the live bar, and every metrics.log_every_steps (and at an epoch's or the
  // run's last step) a train record of the interval, reduced over all ranks (collective): its figures, each rank's
  // time split and the straggler (said on the console once it has been one rank for StragglerWatch's intervals).
  void step(const StepRecord& s);
  // Seconds spent between steps on what is not training (an evaluation, a checkpoint's save): left out of the
  // interval's samples_per_s.
  void outside_steps(double seconds) { interval_outside_s_ += seconds; }
  // Whether step(s) writes a train record: every metrics.log_every_steps, an epoch's last step and the run's last.
  bool logs_at(const StepRecord& s) const;
  void end_epoch();
  void eval(const EvalRecord& e, const std::string& label);
  // The model's floating-point operations per training sample (forward and backward, FlopCounter's count), known
  // after the first micro-batch: said once, then train records carry the achieved TFLOP/s ("tflops").
  void set_flops_per_sample(double flops);
  // On a GPU: train records also carry "mfu", the achieved TFLOP/s over the world's peak for `precision`
  // (device_peak.h); a device the table does not know is said once, and gets no MFU.
  void set_device_peak(const std::string& gpu_name, MathPrecision precision);
  // The summary's text (collective on CUDA: the peak GPU memory over ranks); rank 0 prints it once model.pt is safe.
  std::string summary(const RunEnd& end);

 private:
  std::optional<double> gpu_peak_mib();                            // max over ranks; none on CPU
  double tflops(double samples_per_s) const;                       // the achieved TFLOP/s at that rate
  std::optional<double> mfu(double samples_per_s) const;           // none without FLOPs or a known peak
  IntervalSplit split_of(const std::vector<RankInterval>& ranks);  // also warns of a lasting straggler
  std::string rank_place(int64_t rank) const;                      // "rank 1 (host h, pid 123)"
  void write_train(const StepRecord& s, const IntervalSplit& split, std::optional<double> gpu_mib, double wall_s);
  void write_eval(const EvalRecord& e, double wall_s);
  void write_record(const MetricValues& values, int64_t step);
  void write_classes() const;
  void warn_of_mlflow_failure();

  MetricsConfig cfg_;
  std::string out_dir_;
  c10::Device device_;
  ReportingRanks ranks_;
  bool rank_zero_;
  SumOverRanks sum_;
  MaxOverRanks max_;
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<JsonlWriter> jsonl_;
  std::unique_ptr<MetricsEndpoint> endpoint_;  // metrics.listen's, rank 0's; null when off
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::optional<MlflowRunSpec> mlflow_spec_;  // metrics.mlflow_uri's run, rank 0's; none when off
  std::string mlflow_resumed_id_;             // the checkpoint's "mlflow_run_id"
  std::unique_ptr<MlflowRun> mlflow_;
  std::vector<std::string> classes_;
  std::chrono::steady_clock::time_point start_, interval_start_;
  double interval_loss_ = 0, interval_correct_ = 0, interval_samples_ = 0, total_samples_ = 0;
  double interval_outside_s_ = 0;  // outside_steps' seconds since interval_start_
  PhaseTimes interval_time_;
  int64_t interval_steps_ = 0;
  StragglerWatch straggler_watch_;
  std::optional<IntervalSplit> last_split_;  // the last train record's, for the summary
  double flops_per_sample_ = 0;              // 0: not counted yet
  double peak_tflops_ = 0;                   // one GPU's peak in the run's precision; 0: unknown (or a CPU run)
  EvalRecord last_eval_;
};

}  // namespace ddp
