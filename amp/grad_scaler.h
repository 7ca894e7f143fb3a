// GradScaler: dynamic loss scaling with torch.amp.GradScaler's rules, defaults and state_dict, CPU and CUDA.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include "config/config.h"

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>
#include <string>

namespace ddp {

// Python: scaler.scale(loss).backward(); scaler.unscale_(opt) (optional); scaler.step(opt); scaler.update().
// The scale lives in a float32 tensor and the growth tracker in an int32 tensor on the loss's device, as in
// Python; unscale() and update() run ATen's _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_,
// which LibTorch 2.x has for CPU as well as CUDA: one code path, the kernels torch.amp.GradScaler runs.
class GradScaler {
 public:
  // Called once per unscale() with the local found_inf (0 or 1); its result decides skipping and backoff.
  // Multi-rank training passes an all-reduce (MAX) here so every rank skips the same steps.
  using ReduceFoundInf = std::function<double(double)>;

  // torch.amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval, enabled) from [amp]; a disabled
  // one is a no-op (the loss unscaled, step() always steps). Throws std::invalid_argument for growth_factor <= 1 or
  // backoff_factor >= 1, as Python does.
  explicit GradScaler(const AmpConfig& amp = {}, bool enabled = true, ReduceFoundInf reduce_found_inf = {});

  // loss * scale (the loss unchanged when disabled). The first call creates the scale on loss's device.
  torch::Tensor scale(const torch::Tensor& loss);
  // Multiplies every gradient of opt by 1/scale (reciprocal taken in float64, applied in float32) and records
  // whether any was inf/NaN (checked before unscaling), then applies reduce_found_inf. Once per optimizer
  // per update(): a second call, or a call after step(), throws std::logic_error.
  void unscale(torch::optim::Optimizer& opt);
  // Unscales if not yet done, then runs opt.step() unless found_inf. Returns whether opt.step() ran.
  bool step(torch::optim::Optimizer& opt);
  // Backs off / grows the scale from this iteration's found_inf (summed over optimizers), then forgets the
  // per-optimizer stages. Throws std::logic_error if no optimizer was unscaled since the last update().
  void update();
  // update(new_scale): Python's manual override; fills the scale and leaves the growth tracker alone.
  void update(double new_scale);

  // The found_inf that decides (after reduce_found_inf / set_found_inf), summed over this iteration's
  // optimizers; local_found_inf is the value the gradients alone gave, before any reduction. Both read the
  // current iteration: update() resets them to false.
  bool found_inf() const;
  bool local_found_inf() const;
  // Replaces the deciding found_inf of opt (after unscale, before step), e.g. with an all-reduced value.
  void set_found_inf(torch::optim::Optimizer& opt, double value);

  double get_scale() const;        // init_scale before the first scale(); 1.0 when disabled
  int64_t growth_tracker() const;  // consecutive clean steps since the last growth or backoff; 0 when disabled
  int64_t skipped_steps() const { return skipped_steps_; }  // step() calls that skipped opt.step()
  // The scale's rules: [amp]'s values, or those a load_state_dict() brought.
  const AmpConfig& options() const { return options_; }

  // Python's state_dict(): {scale: float, growth_factor: float, backoff_factor: float, growth_interval: int,
  // _growth_tracker: int}; empty when disabled. load_state_dict of an empty dict throws (as Python does).
  c10::impl::GenericDict state_dict() const;
  void load_state_dict(const c10::impl::GenericDict& state);
  // Range checks of a state_dict() read from a file (a crafted or damaged one must not set a NaN or zero scale):
  // throws std::runtime_error naming the field that is not a finite number in its range.
  static void check_state_dict(const c10::impl::GenericDict& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct OptimizerState {
    Stage stage = Stage::kReady;
    double local_found_inf = 0.0;
    torch::Tensor found_inf;  // float32 [1] on the scale's device: the deciding value
  };
  OptimizerState& state_of(torch::optim::Optimizer& opt);
  void check_initialised(const char* what) const;

  AmpConfig options_;
  bool enabled_;
  ReduceFoundInf reduce_found_inf_;
  int64_t init_growth_tracker_ = 0;
  torch::Tensor scale_;           // float32 [1]
  torch::Tensor growth_tracker_;  // int32 [1]
  std::map<const torch::optim::Optimizer*, OptimizerState> per_optimizer_;
  int64_t skipped_steps_ = 0;
};

}  // namespace ddp
