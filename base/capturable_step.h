// CapturableStep: an optimizer whose step runs without the host deciding anything: a loss scaler's found_inf taken on
// the device (torch.optim's _step_supports_amp_scaling) and the learning rate read from a device tensor (torch.optim's
// fused kernels with a tensor lr), so that the step can be captured in a CUDA graph and replayed.
#pragma once

#include <torch/types.h>

#include <type_traits>

namespace ddp {

class CapturableStep {
 public:
  virtual ~CapturableStep() = default;
  // Whether this optimizer, as configured, steps this way (its fused kernels do).
  virtual bool capturable() const = 0;
  // From now on every step reads the learning rate from `lr` (float32 [] on the parameters' device), whose value the
  // caller keeps current; an undefined tensor goes back to the param groups' lr.
  virtual void read_lr_from(torch::Tensor lr) = 0;
  // One step that changes no parameter and no state wherever found_inf (float32 [1], any device) is nonzero.
  virtual void step_unless_found_inf(const torch::Tensor& found_inf) = 0;
};

// An optimizer row's steps_on_device, read from the class its factory makes: whether it is a CapturableStep.
template <class Optimizer>
inline constexpr bool steps_on_device_v = std::is_base_of_v<CapturableStep, Optimizer>;

}  // namespace ddp
