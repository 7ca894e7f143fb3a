// linear: torch.nn.Linear's forward as PyTorch computes it, for inputs of any rank.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

namespace ddp {

// at::linear(x, weight, bias), what torch.nn.functional.linear runs (a 3-D contiguous input folds into one addmm).
// LibTorch's LinearImpl::forward runs matmul and then adds the bias for inputs above 2-D, which rounds differently
// from PyTorch's.
inline at::Tensor linear(torch::nn::LinearImpl& fc, const at::Tensor& x) { return at::linear(x, fc.weight, fc.bias); }

}  // namespace ddp
