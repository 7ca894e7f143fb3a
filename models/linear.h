// linear: torch.nn.Linear's forward as PyTorch computes it, for inputs of any rank; the transformers' LayerNorm.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

namespace ddp {

// at::linear(x, weight, bias), what torch.nn.functional.linear runs (a 3-D contiguous input folds into one addmm).
// LibTorch's LinearImpl::forward runs matmul and then adds the bias for inputs above 2-D, which rounds differently
// from PyTorch's.
inline at::Tensor linear(torch::nn::LinearImpl& fc, const at::Tensor& x) { return at::linear(x, fc.weight, fc.bias); }

// torchvision's ConvNeXt and VisionTransformer norm layer: partial(nn.LayerNorm, eps=1e-6) over the last `dim`.
inline torch::nn::LayerNorm layer_norm(int64_t dim) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(1e-6));
}

}  // namespace ddp
