// AveragedModel: an exponential moving average of a model's weights and buffers, as torch.optim.swa_utils computes it.
#pragma once

#include "models/classifier.h"

#include <ATen/core/Dict.h>

#include <memory>

namespace ddp {

// torch.optim.swa_utils.AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True), held in a
// second model of the same architecture: the first update copies the model's parameters and buffers, each later one
// moves the floating-point ones towards them (torch._foreach_lerp_(ema, model, 1 - decay)) and sets integer buffers
// (BatchNorm's num_batches_tracked) to decay * ema + (1 - decay) * model, truncated. Without a model to average in:
// disabled, every call a no-op and nothing in a checkpoint.
//
// Which steps update it (torchvision's references/classification/train.py, --model-ema-steps): the first optimizer
// step of each epoch and every `every`th after it; an update after one of the steps 1 to `restart_through` (the
// learning rate's warmup) is followed by a restart (n_averaged = 0), so the next update copies the weights again.
struct EmaSchedule {
  int64_t every = 1;
  int64_t restart_through = 0;
};

class AveragedModel {
 public:
  // `average`: the model the average lives in (built like the trained one; its own values are overwritten by the
  // first update); null: disabled.
  AveragedModel(std::shared_ptr<Classifier> average, double decay, EmaSchedule schedule = {});

  bool enabled() const { return average_ != nullptr; }
  // After optimizer step `step` (1-based, of the run), the `step_in_epoch`th of its epoch: an update where the
  // schedule has one.
  void step_ended(const torch::nn::Module& model, int64_t step_in_epoch, int64_t step);
  // One update (update_parameters).
  void update(const torch::nn::Module& model);
  Classifier& model() { return *average_; }
  int64_t updates() const { return n_averaged_; }
  // Whether the average holds weights: updated at least once (a restart during the warmup keeps the weights it copied),
  // or restored from a checkpoint that holds it. torchvision's train.py evaluates it at every evaluation from then on.
  bool holds_weights() const { return holds_weights_; }
  // An update that a replayed CUDA graph ran (its kernels were captured from update()): counted here.
  void count_replayed_update() {
    if (average_) ++n_averaged_, holds_weights_ = true;
  }

  // Checkpoint entries: "ema" (name -> tensor, the averaged module's state_dict) and "ema_n_averaged".
  void state_dict(c10::impl::GenericDict& out) const;
  // Restores them; absent entries (a checkpoint written without the average) start it afresh.
  void load_state_dict(const c10::impl::GenericDict& state);

 private:
  std::shared_ptr<Classifier> average_;
  double decay_;
  EmaSchedule schedule_;
  int64_t n_averaged_ = 0;
  bool holds_weights_ = false;
};

}  // namespace ddp
