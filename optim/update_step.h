// What every optimizer's step shares: torch.optim's closure handling around the update, and the parameters of a group
// that have gradients.
#pragma once

#include <torch/optim/optimizer.h>

#include <functional>
#include <vector>

namespace ddp {

// torch.optim's Optimizer.step(closure): the closure's loss computed with grad enabled, then `update()` under no_grad;
// returns the loss (undefined without a closure).
template <class Update>
torch::Tensor step_with_closure(const std::function<torch::Tensor()>& closure, Update&& update) {
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  update();
  return loss;
}

// The group's parameters whose .grad is defined, in order; `optimizer` names the optimizer in the error torch.optim
// raises for a sparse gradient ("SGD does not support sparse gradients").
inline std::vector<torch::Tensor> params_with_grad(const torch::optim::OptimizerParamGroup& group,
                                                   const char* optimizer) {
  std::vector<torch::Tensor> params;
  for (const auto& p : group.params())
    if (p.grad().defined()) {
      TORCH_CHECK(!p.grad().is_sparse(), optimizer, " does not support sparse gradients");
      params.push_back(p);
    }
  return params;
}

}  // namespace ddp
