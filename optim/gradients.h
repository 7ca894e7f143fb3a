// Gradient housekeeping around an optimizer step: zero_grad (torch.optim.Optimizer.zero_grad) and the global norm
// with its clipping (torch.nn.utils.get_total_norm, clip_grad_norm_), left on the device.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <vector>

namespace ddp {

// torch.optim.Optimizer.zero_grad() (set_to_none=True, its default): every gradient is dropped, so the next backward
// hands its gradients to the parameters as they are computed (AccumulateGrad keeps the new tensor, no addition into
// zeros) and nothing holds gradient memory through the forward. A gradient that is a view of a DDP bucket
// (dist.gradient_as_bucket_view) is dropped too: the bucket stays the Reducer's, which copies the next gradient into
// it and points the parameter's gradient at it again.
void zero_grad(torch::optim::Optimizer& optimizer);

// torch.optim.Optimizer.zero_grad(set_to_none=False): zeroes each gradient where it lives (one multi-tensor kernel per
// device and dtype on CUDA). Unlike LibTorch's Optimizer::zero_grad, it accepts a gradient that is a view of a DDP
// bucket (whose detach_() LibTorch's version calls and the view refuses).
void zero_grad_in_place(torch::optim::Optimizer& optimizer);

// The parameters' gradients that are defined, in order.
std::vector<torch::Tensor> defined_grads(const std::vector<torch::Tensor>& params);

// The global L2 norm of `grads`, as torch.nn.utils.get_total_norm computes it with foreach=None: one norm per gradient
// (torch._foreach_norm where PyTorch runs multi-tensor kernels, linalg.vector_norm elsewhere), then the norm of those.
// A float32 scalar on the first gradient's device (a CPU zero when there are none); nothing is read to the host.
torch::Tensor total_norm(const std::vector<torch::Tensor>& grads);

// torch.nn.utils.clip_grad_norm_(params, max_norm) with foreach=None: scales `grads` in place by
// min(1, max_norm / (norm + 1e-6)) and returns the pre-clip norm (total_norm), still on the device.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm);

// Whether any element of gradients is inf or NaN, from one pass over them: ATen's
// _amp_foreach_non_finite_check_and_unscale_ at scale 1, the check torch.amp.GradScaler runs before a fused
// optimizer's step. Its flag and its scale argument stay allocated between calls.
class NonFiniteCheck {
 public:
  // A float32 [1] tensor on the first gradient's device: 1 when some element is inf or NaN, else 0 (also when there
  // are no gradients). Nothing is read to the host.
  torch::Tensor operator()(const std::vector<torch::Tensor>& grads);

 private:
  torch::Tensor found_, one_;  // on the first gradient's device
};

}  // namespace ddp
