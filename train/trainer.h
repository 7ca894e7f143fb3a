// Trainer: builds data, model, optimizer and DDP from a Config, resumes, and runs steps, epochs and evaluation.
#pragma once

#include "config/config.h"
#include "data/batch_mix.h"
#include "data/dataset.h"
#include "data/epoch_sampler.h"
#include "data/loader.h"
#include "distributed/context.h"
#include "distributed/reduce.h"
#include "models/classifier.h"
#include "optim/gradients.h"
#include "report/profiler.h"
#include "report/reporter.h"
#include "report/sample_log.h"
#include "train/averaged_model.h"
#include "train/preemption.h"
#include "train/rank_generators.h"
#include "train/step_figures.h"
#include "train/train_state.h"

#include <torch/optim/optimizer.h>

#include <ATen/core/Dict.h>

#include <memory>
#include <string>

namespace ddp {

class Checkpointer;
class DeviceFeed;
class GradientSync;
class LoaderThreads;
class GradScaler;

// A run: setup(), then resume() and train(), or evaluate_only(). Its methods are defined by concern, a file each:
// trainer.cpp set-up and the run's plan; train_data.cpp the input; train_loop.cpp resume, epochs, the run's end;
// trainer_step.cpp the optimizer step; trainer_graph.cpp its CUDA graph; trainer_eval.cpp evaluation;
// trainer_state.cpp the checkpoint dict.
class Trainer {
 public:
  Trainer(Config cfg, DistContext ctx);
  ~Trainer();

  // Loads data, builds the model (seeded by job.seed, or init_from), the optimizer, the loss scaler (a no-op one
  // when loss scaling is off) and the gradient sync (a no-op one for a world of one); rank 0 prints the banner.
  void setup();
  // Before training: refuses a config that gives no training batch (ConfigError) before any file is touched, then
  // applies checkpoint.resume (rank 0 chooses, every rank loads) and opens rank 0's metrics (appended to on a resume).
  void resume();
  // The epoch loop from the current position: steps, logging, evaluation, checkpoints; writes model.pt at the end.
  void train();
  // The process's exit code after train(): 0, or kRequeueExitCode when it stopped for a scheduler's time limit.
  int exit_code() const;
  // Evaluates the current weights (init_from or fresh init), reports it like a training eval, no training.
  void evaluate_only();

  // One micro-batch's figures, still on the device (read once per step, in train_step).
  struct MicroBatchResult {
    torch::Tensor loss;     // mean over the micro-batch, float32, shape []
    torch::Tensor correct;  // int64, shape []
    int64_t samples = 0;
    PhaseTimes time;  // its compute and its wait for the gradient all-reduce
  };
  // One micro-batch, the step's `micro_batch`-th: mixed (data.mixup_alpha, data.cutmix_alpha), forward,
  // loss / loss_divisor, backward; `sync` = all-reduce gradients in this backward.
  MicroBatchResult forward_backward(const Batch& batch, bool sync, double loss_divisor, int64_t micro_batch = 0);
  // One optimizer step over micro-batches (gradients synced on the last only), recorded into `s`, which place() has
  // filled for it. Gradients that are not finite and that no loss scaler handles stop the run, or skip the step (see
  // skip_if_not_finite). The step's figures stay on the device and are read where the Reporter logs `s`: its
  // loss_sum and correct are then the sums since the last logged step, with grad_norm, loss_scale and skipped_steps
  // (zero, NaN and the defaults elsewhere).
  void train_step(const std::vector<Batch>& micro_batches, StepRecord& s);
  // training.cuda_graph's step: eager on the side stream for the warm-up steps, then captured once and replayed for
  // every full batch (a partial last batch runs train_step); the same record as train_step's. Its non-finite check
  // (no loss scaler) is read one step late: the step's update was already skipped on the device.
  void graph_step(const std::vector<Batch>& micro_batches, StepRecord& s);
  // The model's accuracy and loss on the test split, summed over ranks; `model` defaults to the trained one.
  EvalRecord evaluate(Classifier* model = nullptr);

  // Everything a checkpoint holds (torch.load-readable dict), part by part, its tensors copies that training does not
  // touch (a checkpoint is serialised while training goes on); collective: every rank must call it. Whole on rank 0,
  // which serialises it; the other ranks' dicts lack the model, optimizer, scaler and EMA entries.
  c10::impl::GenericDict state_dict();
  // "" when a checkpoint dict is one this run can continue from, else why not: each part's range checks.
  std::string check_state_dict(const c10::impl::GenericDict& state) const;
  // Restores state_dict() (format 2, or format 1's flat optimizer layout), or a checkpoint Python wrote: model,
  // optimizer (torch.optim form) and global_step required, every other entry optional (docs/checkpoints.md).
  // Mismatched model keys/shapes throw listing them; a missing required entry or a wrong type throws naming the entry.
  void load_state_dict(const c10::impl::GenericDict& state);

  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const Dataset& dataset() const { return dataset_; }

 private:
  // Optimizer steps in one epoch for this world size, or for `world` ranks x `batch` (a checkpoint's).
  int64_t steps_per_epoch() const;
  int64_t steps_per_epoch(int64_t world, int64_t batch) const;
  // Optimizer steps the run will have taken when it has trained `epochs`: those done, the rest of the epoch in progress
  // and the epochs after it at this run's world and batch size (epochs x steps_per_epoch unless a resume re-sharded).
  int64_t planned_steps(int64_t epochs) const;
  // training.epochs, or with epochs = 0 the epochs training.max_steps reaches from here: the epoch in progress, then
  // as many whole ones as the steps left need.
  int64_t epochs_to_train() const;
  // Which of training.epochs and training.max_steps ended the run, when the config sets both ("" otherwise).
  std::string ended_by() const;
  // AveragedModel's decay: training.ema_decay, or with training.ema_adjust torchvision's reference adjustment of it.
  double ema_decay() const;
  enum class EpochEnd { kFinished, kCut, kPreempted };  // every batch done | max_steps inside it | a signal

  LoaderOptions loader_options(int64_t batch_size, bool drop_last) const;
  // This rank's share of the training split: DistributedSampler, RASampler with data.ra_reps, or for a split of tar
  // shards ShardSampler, its epoch ordered for `order_world` ranks (0: this world); with `world`, rank 0's share in
  // a world of that many ranks.
  std::unique_ptr<EpochSampler> train_sampler(int64_t order_world = 0, int64_t world = 0) const;
  // A ConfigError (exit 2, with the fix) when samples_per_rank training samples give no optimizer step, or a batch
  // smaller than the model can train on (BatchNorm with one value per channel), or with data.ra_reps less than one
  // batch per rank (RASampler's length). `where` ("" for a whole epoch) names a resumed partial epoch, which may hold
  // no batch at all.
  void check_training_batches(int64_t samples_per_rank, const std::string& where) const;
  // The model section as this run builds its models: model.memory_format "auto" resolved (channels_last on CUDA, the
  // model's default elsewhere).
  ModelConfig model_config() const;
  void build_model();
  void build_scaler();
  // Throws, before the optimizer steps, when the step's gradients hold inf/NaN and no loss scaler skips the step:
  // the same on every rank (the gradients are the all-reduced ones), no extra collective. `norm` (the global norm,
  // where the step computed it) decides when defined, else one pass over `grads`. The error names the step, this
  // rank's loss (the micro-batches' mean losses and sizes), the first parameter in backward order whose gradient is
  // not finite, and the newest checkpoint this run wrote.
  // With training.on_nonfinite = "skip", such a step is skipped instead (true: skip it) until
  // training.max_nonfinite_skips have been skipped in a row; the next one stops as above.
  bool skip_if_not_finite(const std::vector<torch::Tensor>& grads, const torch::Tensor& norm,
                          const std::vector<std::pair<torch::Tensor, int64_t>>& losses);
  // A non-finite step under training.on_nonfinite = "skip": counted and warned of (true) unless the limit in a row is
  // reached (false: stop it).
  bool skip_nonfinite(int64_t step);
  // Throws the run's error for non-finite gradients at `step`: `detail` (the loss, the parameter), `stopped` (what
  // became of the optimizer step).
  [[noreturn]] void stop_nonfinite(int64_t step, const std::string& detail, const std::string& stopped);
  // The update after the step's backward, written once for the eager step and the captured one: unscale, the pre-clip
  // global L2 norm of the true gradients (clipped as torch.nn.utils.clip_grad_norm_ does when training.clip_grad_norm
  // > 0; otherwise computed only when `want_norm`), the optimizer step unless the gradients are not finite, the loss
  // scaler's update and the EMA's (on its schedule). Without a loss scaler, the non-finite verdict is read on the host
  // when `losses` (the micro-batches' mean losses and sizes) is given: skip_if_not_finite skips the step or stops the
  // run. A captured step passes none: the verdict stays on the device, the optimizer takes it as found_inf and skips
  // there, and `flag` carries it to settle_graph_flag.
  struct Update {
    torch::Tensor norm;  // the pre-clip norm; undefined when neither clipped nor wanted
    torch::Tensor flag;  // float32 [1], nonzero where the optimizer skipped on the device; undefined on the host path
  };
  Update update_parameters(const StepRecord& s, bool want_norm,
                           const std::vector<std::pair<torch::Tensor, int64_t>>* losses);
  // The step's end, eager or replayed: the global step, the replica check, and where logged the figures and `norm`.
  void end_step(StepRecord& s, bool logged, const torch::Tensor& norm);
  // training.cuda_graph: handles the replayed step's non-finite flag once the device has it (no-op when none waits).
  void settle_graph_flag();
  void build_graph();
  RunFacts run_facts() const;
  // The run's counts for StepRecord and RunEnd: unreadable training samples replaced on this rank (-1: the split is
  // not read per sample) and steps skipped for non-finite gradients (-1: training.on_nonfinite stops instead).
  int64_t bad_samples() const;
  int64_t nonfinite_skips() const;

  EpochEnd train_epoch();
  // The input side (train_data.cpp). data.workers as a number of threads, "auto" resolved for this rank.
  int64_t loader_workers() const;
  // The loader threads every later loader of the run shares; says what data.workers = "auto" chose.
  void start_loader_threads();
  // The device feed of the training loader, which lives across epochs: made for the epoch in progress (its samples
  // `samples`, from position.batch_in_epoch) unless the loader hands that out already; the next epoch is planned on
  // it when the run will train one.
  DeviceFeed& training_feed(const EpochSamples& samples);
  // After an epoch's last step (cut: by training.max_steps): the training loader goes unless an epoch is planned.
  void end_training_epoch(bool cut);
  // Where the step about to run (global step + 1) of an epoch of num_batches micro-batches stands, for the Reporter.
  void place(StepRecord& s, int64_t num_batches) const;
  // metrics.sample_ids: the step's samples, batches [first_batch, end_batch) of the epoch's indices.
  void log_samples(const std::vector<int64_t>& epoch_samples, int64_t first_batch, int64_t end_batch);
  // After a finished epoch: its evaluation (training.eval_every_epochs) and checkpoint (checkpoint.every_epochs).
  // Returns whether it evaluated.
  bool end_epoch();
  void evaluate_and_report(const std::string& label);
  void preempted();
  // The run's end: final evaluation unless the last epoch had one, final checkpoint, model.pt, summary.
  void finish(bool evaluated);
  void traced(const std::string& trace);  // says which steps profile.steps traced, and where
  void write_model();
  void save_checkpoint(double eval_accuracy);

  // The optimizer entries: the name must match the config's; differing hyperparameters are a warning.
  void load_optimizer_entry(const c10::impl::GenericDict& state, int64_t format_version);
  // Whether every rank stops now (SIGTERM/SIGINT/SIGUSR1 on any rank; stop_ says for what). Agreement lags one step:
  // the vote started after step k is counted after step k+1, so no rank waits for it (a blocking vote cost 10-20% of
  // a Net step).
  bool stop_requested();

  Config cfg_;
  DistContext ctx_;
  Reporter reporter_;
  Dataset dataset_;
  std::shared_ptr<LoaderThreads> loader_threads_;  // data.workers threads; null: each loader starts its own
  std::unique_ptr<BatchLoader> train_loader_;      // reads dataset_.train: declared after it, let go before it
  std::unique_ptr<DeviceFeed> train_feed_;         // train_loader_'s
  std::shared_ptr<Classifier> model_;
  std::unique_ptr<AveragedModel> ema_;  // training.ema_decay; disabled (a no-op) at 0
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<GradientSync> gradient_sync_;  // no-op for a world of one
  std::unique_ptr<GradScaler> scaler_;           // disabled (a no-op) when loss scaling is off
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<StepProfiler> profiler_;  // profile.steps; traces nothing at 0
  std::unique_ptr<SampleLog> sample_log_;   // metrics.sample_ids; writes nothing when off
  bool flops_counted_ = false;              // the first micro-batch's FLOPs per sample went to the Reporter
  StepFigures figures_;                     // the log interval's loss and correct count, on the device
  NonFiniteCheck non_finite_;               // a step's inf/NaN check where no norm is computed
  struct GraphState;
  std::unique_ptr<GraphState> graph_;  // training.cuda_graph; null when off
  RankGenerators generators_;
  BatchMix mix_;  // data.mixup_alpha, data.cutmix_alpha; a no-op when both are 0
  TrainState state_;
  c10::ScalarType amp_dtype_ = c10::ScalarType::BFloat16;
  std::string init_from_note_;  // how model.init_from's layout was read; "" when plain or unset
  double base_lr_ = 0;
  int64_t total_steps_ = 0;                               // of this run: epochs x steps per epoch, capped by max_steps
  int64_t epochs_ = 0;                                    // of this run: epochs_to_train() when it starts
  double last_eval_accuracy_ = -1;                        // the latest evaluation's, for the checkpoint that follows it
  int64_t nonfinite_skips_ = 0, nonfinite_in_a_row_ = 0;  // training.on_nonfinite = "skip", in this run
  AsyncAllReduceMax stop_vote_{ctx_};
  StopRequest stop_ = StopRequest::kNone;  // what the ranks agreed on; kRequeue makes exit_code() 75
};

}  // namespace ddp
