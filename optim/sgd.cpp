// SGD with momentum, dampening 0, nesterov and weight decay: LibTorch's port of torch.optim.SGD, and on CUDA the
// multi-tensor form that torch.optim.SGD runs there by default.
#include "optim/optimizer.h"

#include "base/foreach.h"

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_mul.h>
#include <torch/optim/sgd.h>

namespace ddp {
namespace {

// torch.optim.SGD with foreach=None: _multi_tensor_sgd where every parameter is on a device with multi-tensor
// kernels (CUDA), LibTorch's per-parameter SGD::step (the same as _single_tensor_sgd) otherwise, as on the CPU.
// The state (SGDParamState's momentum_buffer per parameter) is LibTorch's either way.
class MultiTensorSGD : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;

  torch::Tensor step(LossClosure closure = nullptr) override {
    for (const auto& group : param_groups_)
      for (const auto& p : group.params())
        if (p.grad().defined() && (!uses_foreach_kernels(p.device()) || p.grad().is_sparse()))
          return torch::optim::SGD::step(std::move(closure));
    torch::Tensor loss;
    if (closure) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    torch::NoGradGuard no_grad;
    for (auto& group : param_groups_) step_group(group);
    return loss;
  }

 private:
  void step_group(torch::optim::OptimizerParamGroup& group) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    std::vector<torch::Tensor> params, grads;
    for (const auto& p : group.params())
      if (p.grad().defined()) {
        params.push_back(p);
        grads.push_back(p.grad());
      }
    for (const auto& indices : group_by_device_and_dtype(params)) {
      std::vector<torch::Tensor> device_params = pick(params, indices), device_grads = pick(grads, indices);
      if (o.weight_decay() != 0) device_grads = at::_foreach_add(device_grads, device_params, o.weight_decay());
      if (o.momentum() != 0) {
        std::vector<torch::Tensor> bufs;
        bool all_have_buffers = true;
        for (const auto& p : device_params)
          all_have_buffers = all_have_buffers && state_.count(p.unsafeGetTensorImpl());
        if (all_have_buffers) {
          for (const auto& p : device_params) bufs.push_back(buffer_of(p));
          at::_foreach_mul_(bufs, o.momentum());
          at::_foreach_add_(bufs, device_grads, 1 - o.dampening());
        } else {
          for (size_t i = 0; i < device_params.size(); ++i) {
            auto found = state_.find(device_params[i].unsafeGetTensorImpl());
            torch::Tensor buf;
            if (found == state_.end()) {
              buf = device_grads[i].detach().clone();
              auto state = std::make_unique<torch::optim::SGDParamState>();
              state->momentum_buffer(buf);
              state_[device_params[i].unsafeGetTensorImpl()] = std::move(state);
            } else {
              buf = buffer_of(device_params[i]);
              buf.mul_(o.momentum()).add_(device_grads[i], 1 - o.dampening());
            }
            bufs.push_back(buf);
          }
        }
        // As _multi_tensor_sgd: nesterov adds to the gradients in place (the parameters' .grad without weight decay).
        if (o.nesterov())
          at::_foreach_add_(device_grads, bufs, o.momentum());
        else
          device_grads = bufs;
      }
      at::_foreach_add_(device_params, device_grads, -o.lr());
    }
  }

  torch::Tensor& buffer_of(const torch::Tensor& p) {
    return static_cast<torch::optim::SGDParamState&>(*state_.at(p.unsafeGetTensorImpl())).momentum_buffer();
  }
};

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_sgd(const OptimizerConfig& cfg, double lr,
                                                  std::vector<torch::Tensor> params) {
  auto options = torch::optim::SGDOptions(lr)
                     .momentum(cfg.momentum)
                     .weight_decay(cfg.weight_decay)
                     .nesterov(cfg.nesterov)
                     .dampening(0);
  return std::make_unique<MultiTensorSGD>(std::move(params), options);
}

}  // namespace ddp
