// Helpers shared by the optimizers' torch.optim state writers and readers: parameters in order, LibTorch's state key,
// checked fields and copies.
#pragma once

#include <torch/optim/optimizer.h>

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

// The optimizer's parameters over all its param groups, in order (torch.optim's parameter indices).
std::vector<torch::Tensor> optimizer_params(const torch::optim::Optimizer& opt);
// LibTorch keys optimizer state by the parameter's TensorImpl address.
void* param_state_key(const torch::Tensor& p);
// An empty str-keyed dict, as torch.optim's state_dict() entries are.
c10::impl::GenericDict new_str_dict();
// Entry `key` of `fields`; throws "<where> has no "<key>" entry" when absent.
const c10::IValue& state_field(const c10::impl::GenericDict& fields, const std::string& key, const std::string& where);
// `fields`' "step" (torch: a float32 0-dim tensor; older files an int or float) as a non-negative whole number.
int64_t state_step(const c10::impl::GenericDict& fields, const std::string& where);
// A step count as torch.optim keeps it outside capturable/fused use: a float32 0-dim CPU tensor.
torch::Tensor step_tensor(int64_t step);
// `v` as a tensor shaped like parameter `like`, on its device and dtype (a copy); throws naming `name`.
torch::Tensor state_tensor_like(const c10::IValue& v, const torch::Tensor& like, const std::string& name);

}  // namespace ddp
