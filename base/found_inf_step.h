// FoundInfStep: an optimizer that takes a loss scaler's found_inf on the device (torch.optim's
// _step_supports_amp_scaling: its fused kernels skip the update themselves, so nothing is read to the host).
#pragma once

#include <torch/types.h>

namespace ddp {

class FoundInfStep {
 public:
  virtual ~FoundInfStep() = default;
  // Whether step_unless_found_inf applies to this optimizer as it is configured.
  virtual bool takes_found_inf() const = 0;
  // One optimizer step that changes no parameter and no state wherever found_inf (float32 [1], any device) is nonzero.
  virtual void step_unless_found_inf(const torch::Tensor& found_inf) = 0;
};

}  // namespace ddp
