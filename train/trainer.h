// Trainer: builds data, model, optimizer and DDP from a Config and runs the epoch loop with evaluation.
#pragma once

#include "config/config.h"
#include "report/metrics.h"
#include "report/progress.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "distributed/context.h"
#include "distributed/reduce.h"
#include "models/classifier.h"

#include <torch/optim/optimizer.h>

#include <ATen/core/Dict.h>
#include <ATen/core/Generator.h>

#include <memory>
#include <optional>
#include <string>

namespace ddp {

class DistributedDataParallel;
class GradScaler;
class StepAllocator;
class TensorBoardWriter;

struct EvalResult {
  double loss = 0;      // mean loss over the whole test split (all ranks)
  double accuracy = 0;  // correct / total
  int64_t correct = 0;
  int64_t total = 0;
  // Top-5 (the label among the five largest outputs); -1 when the model has 5 classes or fewer.
  int64_t correct_top5 = -1;
  double accuracy_top5 = -1;
};

// Sums over the micro-batches of one optimizer step, on this rank.
struct StepStats {
  double loss_sum = 0;  // sum of per-sample losses
  int64_t correct = 0;
  int64_t samples = 0;
  double grad_norm = -1;  // pre-clip global L2 norm of the unscaled gradients
  bool skipped = false;   // loss scaler found inf/NaN: no parameter or optimizer state changed
};

struct TrainSummary {
  int64_t steps = 0;
  int64_t epochs = 0;
  EvalResult final_eval;
  double best_accuracy = 0;
  double wall_s = 0;
  double samples_per_s = 0;
  int64_t skipped_steps = 0;        // AMP steps skipped for inf/NaN
  double gpu_mem_peak_mib = -1;     // max over ranks of torch.cuda.max_memory_allocated(); < 0 on CPU
  int64_t checkpoints_written = 0;  // by this run
  std::string model_path;           // final model.pt ("" when preempted)
  bool preempted = false;           // stopped by SIGTERM/SIGINT after writing a checkpoint
};

class Trainer {
 public:
  Trainer(Config cfg, DistContext ctx);
  ~Trainer();

  // Loads data, builds the model (seeded by job.seed, or init_from), the optimizer and, for world > 1, DDP.
  void setup();
  // One micro-batch: forward, loss / loss_divisor, backward; `sync` = all-reduce gradients in this backward.
  StepStats forward_backward(const Batch& batch, bool sync, double loss_divisor);
  // One optimizer step over micro-batches (gradients synced on the last only).
  StepStats train_step(const std::vector<Batch>& micro_batches);
  EvalResult evaluate();
  TrainSummary train();
  // Evaluates the current weights (init_from or fresh init), reports it like a training eval, no training.
  EvalResult evaluate_only();

  // Everything a checkpoint holds (torch.load-readable dict); collective: every rank must call it.
  c10::impl::GenericDict state_dict();
  // Restores state_dict() (format 2, or format 1's flat optimizer layout), or a checkpoint Python wrote: model,
  // optimizer (torch.optim form) and global_step required, every other entry optional (README). Mismatched model
  // keys/shapes throw listing them; a missing required entry or a wrong type throws naming the entry.
  void load_state_dict(const c10::impl::GenericDict& state);
  // Rank 0 writes a checkpoint of the current state (collective). eval_accuracy < 0: none.
  void save_checkpoint(double eval_accuracy);
  // Applies checkpoint.resume (auto | never | PATH); rank 0 chooses and broadcasts the bytes.
  void resume();

  Classifier& model() { return *model_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  GradScaler* scaler() { return scaler_.get(); }
  c10::ScalarType amp_dtype() const { return amp_dtype_; }  // amp.dtype resolved for the device (when amp is on)
  const Dataset& dataset() const { return dataset_; }
  const Config& config() const { return cfg_; }
  // How model.init_from's layout was read (e.g. "DDP state dict, `module.` prefix stripped"); "" when plain or unset.
  const std::string& init_from_note() const { return init_from_note_; }
  const DistContext& dist() const { return ctx_; }
  int64_t global_step() const { return global_step_; }
  // Optimizer steps in one epoch for this world size.
  int64_t steps_per_epoch() const;

 private:
  LoaderOptions loader_options(int64_t batch_size, bool drop_last) const;
  // A ConfigError (exit 2, with the fix) when samples_per_rank training samples give no optimizer step, or a batch
  // smaller than the model can train on (BatchNorm with one value per channel). `where` ("" for a whole epoch)
  // names a resumed partial epoch, which may hold no batch at all.
  void check_training_batches(int64_t samples_per_rank, const std::string& where) const;
  // Whether checkpoint.every_steps asks for a checkpoint at the current global step.
  bool every_steps_hit() const {
    return cfg_.checkpoint.every_steps > 0 && global_step_ % cfg_.checkpoint.every_steps == 0;
  }
  void log(const std::string& line) const;
  void print_summary(const TrainSummary& s);
  void report_eval(const EvalResult& e, int64_t epoch, double wall_s, const std::string& label);
  void write_metrics(const JsonRecord& r);

  Config cfg_;
  DistContext ctx_;
  Dataset dataset_;
  std::shared_ptr<Classifier> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::unique_ptr<GradScaler> scaler_;    // null when loss scaling is off
  StepAllocator* step_memory_ = nullptr;  // job.step_memory = "planned"
  c10::ScalarType amp_dtype_ = c10::ScalarType::BFloat16;
  JsonlWriter metrics_;
  Progress progress_{"off", false};
  int64_t checkpoints_written_ = 0;
  std::string init_from_note_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // rank 0, metrics.tensorboard
  double base_lr_ = 0;
  // Whether every rank stops now (SIGTERM/SIGINT on any rank). Agreement lags one step: the vote started after
  // step k is counted after step k+1, so no rank waits for it (a blocking vote cost 10-20% of a Net step).
  bool stop_requested();
  AsyncAllReduceMax stop_vote_{ctx_};
  void open_metrics(bool append);
  // load_state_dict's parts: optimizer state (+ name check, hyperparameter warning) and epoch position.
  void load_optimizer_entry(const c10::impl::GenericDict& state, int64_t format_version);
  void load_training_position(const c10::impl::GenericDict& state);
  // Rank 0: cleans crash debris, picks the checkpoint checkpoint.resume names (auto: along the line, past unreadable
  // ones), records the line it continues; returns its path ("" for none) with its bytes and parsed value.
  std::string choose_checkpoint(std::vector<char>& bytes, c10::IValue& value);
  // "" when `bytes` parse as a checkpoint dict whose position entries are in range (value = it), else why not.
  std::string ckpt_parse(const std::vector<char>& bytes, c10::IValue& value) const;
  // This rank's entry of a per-rank list of generator states, else a seed from job.seed, rank and step.
  void restore_rank_generator(at::Generator gen, const std::vector<torch::Tensor>& per_rank);
  // Peak GPU memory in MiB, max over ranks (collective); nullopt on CPU.
  std::optional<double> gpu_mem_peak_mib();
  // The train record's device figures (collective; nothing on CPU).
  void add_device_metrics(JsonRecord& record);

  int64_t global_step_ = 0;
  int64_t epoch_ = 0;                // epoch in progress (0-based)
  int64_t batch_in_epoch_ = 0;       // micro-batches of epoch_ consumed (a multiple of grad_accum_steps or the end)
  int64_t epoch_sample_offset_ = 0;  // global-order position this epoch's loader started at (resharded resume)
  double best_accuracy_ = 0;
  int64_t last_checkpoint_step_ = -1;
};

}  // namespace ddp
