// Helpers shared by the optimizer-state readers and writers: parameters in order, LibTorch's state key, checked copies.
#pragma once

#include <torch/optim/optimizer.h>

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace ddp {

// The optimizer's parameters over all its param groups, in order (torch.optim's parameter indices).
std::vector<torch::Tensor> optimizer_params(const torch::optim::Optimizer& opt);
// LibTorch keys optimizer state by the parameter's TensorImpl address.
void* param_state_key(const torch::Tensor& p);
// `v` as a tensor shaped like parameter `like`, on its device and dtype (a copy); throws naming `name`.
torch::Tensor state_tensor_like(const c10::IValue& v, const torch::Tensor& like, const std::string& name);

}  // namespace ddp
