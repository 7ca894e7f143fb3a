// GradScaler: dynamic loss scaling with torch.amp.GradScaler's rules, defaults and state_dict, CPU and CUDA.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include "config/config.h"

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <vector>
#include <string>

namespace ddp {

// Python: scaler.scale(loss).backward(); scaler.unscale_(opt) (optional); scaler.step(opt); scaler.update().
// The scale lives in a float32 tensor and the growth tracker in an int32 tensor on the loss's device, as in
// Python; unscale() and update() run ATen's _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_,
// which LibTorch 2.x has for CPU as well as CUDA: one code path, the kernels torch.amp.GradScaler runs.
// As in Python, step() is the one place that reads the device (found_inf, to decide whether opt.step() runs), and
// not even there for an optimizer that takes found_inf itself (a CapturableStep: fused SGD), which skips on the device.
// Under DDP every rank unscales the same all-reduced gradients, so every rank skips the same steps without a
// collective of the scaler's own (torch.amp.GradScaler with DistributedDataParallel relies on the same).
class GradScaler {
 public:
  // torch.amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval, enabled) from [amp]; a disabled
  // one is a no-op (the loss unscaled, step() always steps). Throws std::invalid_argument for growth_factor <= 1 or
  // backoff_factor >= 1, as Python does.
  explicit GradScaler(const AmpConfig& amp = {}, bool enabled = true);
  // Whether it scales: a disabled one leaves inf/NaN gradients to the caller.
  bool enabled() const { return enabled_; }

  // loss * scale (the loss unchanged when disabled). The first call creates the scale on loss's device.
  torch::Tensor scale(const torch::Tensor& loss);
  // Multiplies every gradient of opt by 1/scale (reciprocal taken in float64, applied in float32) and records on
  // the device whether any was inf/NaN (checked before unscaling); reads nothing to the host. Once per optimizer
  // per update(): a second call, or a call after step(), throws std::logic_error.
  void unscale(torch::optim::Optimizer& opt);
  // Unscales if not yet done, then steps unless found_inf: an optimizer that takes found_inf (base/capturable_step.h)
  // gets it on the device; for any other, found_inf is read (the step's one host read) and opt.step() runs unless it
  // is set. found_inf() then says whether the step was skipped.
  void step(torch::optim::Optimizer& opt);
  // Backs off / grows the scale from this iteration's found_inf (summed over optimizers) on the device, then forgets
  // the per-optimizer stages. Throws std::logic_error if no optimizer was unscaled since the last update().
  void update();

  // Whether this iteration's gradients held inf/NaN, summed over its optimizers: what step() read, or read now (an
  // optimizer that took found_inf on the device, or one unscaled but not stepped yet). update() resets it to false.
  bool found_inf() const;

  double get_scale() const;        // init_scale before the first scale(); 1.0 when disabled
  int64_t growth_tracker() const;  // consecutive clean steps since the last growth or backoff; 0 when disabled
  // step() calls that skipped the optimizer step (read from the device where the optimizer took found_inf).
  int64_t skipped_steps() const;
  // The scale's rules: [amp]'s values, or those a load_state_dict() brought.
  const AmpConfig& options() const { return options_; }

  // Python's state_dict(): {scale: float, growth_factor: float, backoff_factor: float, growth_interval: int,
  // _growth_tracker: int}; empty when disabled. load_state_dict of an empty dict throws (as Python does).
  c10::impl::GenericDict state_dict() const;
  void load_state_dict(const c10::impl::GenericDict& state);
  // Range checks of a state_dict() read from a file (a crafted or damaged one must not set a NaN or zero scale):
  // throws std::runtime_error naming the field that is not a finite number in its range (growth_interval as
  // amp.growth_interval's, so that a run resumes from its own checkpoints; _growth_tracker an int32, as its tensor).
  static void check_state_dict(const c10::impl::GenericDict& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct OptimizerState {
    Stage stage = Stage::kReady;
    std::vector<torch::Tensor> found_inf_per_device;  // float32 [1] each, on the gradients' devices
    std::optional<bool> found_inf;                    // what step() read; none where the optimizer took it
  };
  OptimizerState& state_of(torch::optim::Optimizer& opt);
  void check_initialised(const char* what) const;

  AmpConfig options_;
  bool enabled_;
  int64_t init_growth_tracker_ = 0;
  torch::Tensor scale_;           // float32 [1]
  torch::Tensor growth_tracker_;  // int32 [1]
  std::map<const torch::optim::Optimizer*, OptimizerState> per_optimizer_;
  int64_t skipped_steps_ = 0;        // decided on the host
  torch::Tensor skipped_on_device_;  // float32 [1]: decided by optimizers that took found_inf; may be undefined
};

}  // namespace ddp
