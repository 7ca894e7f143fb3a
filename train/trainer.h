// Trainer: builds data, model, optimizer and DDP from a Config, resumes, and runs steps, epochs and evaluation.
#pragma once

#include "config/config.h"
#include "data/dataset.h"
#include "data/epoch_position.h"
#include "data/loader.h"
#include "distributed/context.h"
#include "distributed/reduce.h"
#include "models/classifier.h"
#include "report/metrics_sink.h"
#include "report/progress.h"
#include "report/summary.h"

#include <torch/optim/optimizer.h>

#include <ATen/core/Dict.h>
#include <ATen/core/Generator.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace ddp {

class Checkpointer;
class DataParallel;
class DistributedSampler;
class GradScaler;
class StepAllocator;

// Sums over the micro-batches of one optimizer step, on this rank.
struct StepStats {
  double loss_sum = 0;  // sum of per-sample losses
  int64_t correct = 0;
  int64_t samples = 0;
  double grad_norm = -1;  // pre-clip global L2 norm of the unscaled gradients
  bool skipped = false;   // loss scaler found inf/NaN: no parameter or optimizer state changed
};

// A run: setup(), then resume() and train(), or evaluate_only().
class Trainer {
 public:
  Trainer(Config cfg, DistContext ctx);
  ~Trainer();

  // Loads data, builds the model (seeded by job.seed, or init_from), the optimizer, the loss scaler (a no-op one
  // when loss scaling is off) and the data parallelism (a no-op one for a world of one); rank 0 prints the banner.
  void setup();
  // Before training: refuses a config that gives no training batch (ConfigError) before any file is touched, then
  // applies checkpoint.resume (rank 0 chooses, every rank loads) and opens rank 0's metrics (appended to on a resume).
  void resume();
  // The epoch loop from the current position: steps, logging, evaluation, checkpoints; writes model.pt at the end.
  TrainSummary train();
  // Evaluates the current weights (init_from or fresh init), reports it like a training eval, no training.
  EvalResult evaluate_only();

  // One micro-batch: forward, loss / loss_divisor, backward; `sync` = all-reduce gradients in this backward.
  StepStats forward_backward(const Batch& batch, bool sync, double loss_divisor);
  // One optimizer step over micro-batches (gradients synced on the last only).
  StepStats train_step(const std::vector<Batch>& micro_batches);
  EvalResult evaluate();

  // Everything a checkpoint holds (torch.load-readable dict); collective: every rank must call it.
  c10::impl::GenericDict state_dict();
  // Restores state_dict() (format 2, or format 1's flat optimizer layout), or a checkpoint Python wrote: model,
  // optimizer (torch.optim form) and global_step required, every other entry optional (README). Mismatched model
  // keys/shapes throw listing them; a missing required entry or a wrong type throws naming the entry.
  void load_state_dict(const c10::impl::GenericDict& state);

  Classifier& model() { return *model_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const Dataset& dataset() const { return dataset_; }
  const Config& config() const { return cfg_; }
  int64_t global_step() const { return global_step_; }
  // Optimizer steps in one epoch for this world size.
  int64_t steps_per_epoch() const;

 private:
  using Clock = std::chrono::steady_clock;
  // What one epoch's loop needs to know of the run.
  struct EpochRun {
    int64_t epochs = 0, total_steps = 0;
    Clock::time_point start;
    double interval_loss = 0, interval_correct = 0, interval_samples = 0, total_samples = 0;
    Clock::time_point interval_start;
  };
  enum class EpochEnd { kFinished, kCut, kPreempted };  // every batch done | max_steps inside it | a signal

  LoaderOptions loader_options(int64_t batch_size, bool drop_last) const;
  DistributedSampler train_sampler() const;  // this rank's share of the training split
  // A ConfigError (exit 2, with the fix) when samples_per_rank training samples give no optimizer step, or a batch
  // smaller than the model can train on (BatchNorm with one value per channel). `where` ("" for a whole epoch)
  // names a resumed partial epoch, which may hold no batch at all.
  void check_training_batches(int64_t samples_per_rank, const std::string& where) const;
  void build_model();
  void build_scaler();
  void print_banner();
  void log(const std::string& line);

  EpochEnd train_epoch(EpochRun& run);
  // After each step: progress, and every metrics.log_every_steps (or at an epoch's or the run's end) a reduced record.
  void report_step(EpochRun& run, const StepStats& s, double lr, int64_t num_batches);
  ProgressSnapshot snapshot(const EpochRun& run, double lr, int64_t num_batches) const;
  // After a finished epoch: its evaluation (training.eval_every_epochs) and checkpoint (checkpoint.every_epochs).
  void end_epoch(EpochRun& run, TrainSummary& summary, bool& evaluated);
  void report_eval(const EvalResult& e, int64_t epoch, double wall_s, const std::string& label);
  TrainSummary preempted(const EpochRun& run, TrainSummary summary);
  // The run's end: final evaluation unless the last epoch had one, final checkpoint, model.pt, summary.
  void finish(EpochRun& run, TrainSummary& summary, bool evaluated);
  void write_model(TrainSummary& summary);
  void save_checkpoint(double eval_accuracy);

  // load_state_dict's parts: optimizer state (+ name check, hyperparameter warning) and epoch position.
  void load_optimizer_entry(const c10::impl::GenericDict& state, int64_t format_version);
  void load_training_position(const c10::impl::GenericDict& state);
  // This rank's entry of a per-rank list of generator states, else a seed from job.seed, rank and step.
  void restore_rank_generator(at::Generator gen, const std::vector<torch::Tensor>& per_rank);
  // Whether every rank stops now (SIGTERM/SIGINT on any rank). Agreement lags one step: the vote started after
  // step k is counted after step k+1, so no rank waits for it (a blocking vote cost 10-20% of a Net step).
  bool stop_requested();
  // Peak GPU memory in MiB, max over ranks (collective); nullopt on CPU.
  std::optional<double> gpu_mem_peak_mib();

  Config cfg_;
  DistContext ctx_;
  Dataset dataset_;
  std::shared_ptr<Classifier> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<DataParallel> data_parallel_;  // no-op for a world of one
  std::unique_ptr<GradScaler> scaler_;           // disabled (a no-op) when loss scaling is off
  std::unique_ptr<Checkpointer> checkpointer_;
  StepAllocator* step_memory_ = nullptr;  // job.step_memory = "planned"
  c10::ScalarType amp_dtype_ = c10::ScalarType::BFloat16;
  MetricsSink metrics_;  // rank 0's files once resume() has run; nowhere on other ranks
  Progress progress_{ProgressMode::Off, false};
  std::string init_from_note_;  // how model.init_from's layout was read; "" when plain or unset
  double base_lr_ = 0;
  AsyncAllReduceMax stop_vote_{ctx_};

  int64_t global_step_ = 0;
  EpochPosition position_;
  double best_accuracy_ = 0;
};

}  // namespace ddp
