// Adam and AdamW: torch.optim.Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay) from the
// same optimizer.* keys, in torch.optim's three implementations on LibTorch's classes (their options and state): the
// per-parameter loop (LibTorch's own step), foreach (_multi_tensor_adam) and fused (_fused_adam_, _fused_adamw_).
#include "optim/optimizer.h"

#include "base/foreach.h"

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_div.h>
#include <ATen/ops/_foreach_lerp.h>
#include <ATen/ops/_foreach_maximum.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_sqrt.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <unordered_map>

namespace ddp {
namespace {

// Base: torch::optim::Adam or AdamW; State: its per-parameter state. AdamW's options and state have Adam's fields.
template <class Base, class Options, class State, bool kDecoupled>
class KernelAdam : public Base {
 public:
  KernelAdam(std::vector<torch::Tensor> params, const Options& options, UpdateKernels kernels)
      : Base(std::move(params), options), kernels_(kernels) {}

  torch::Tensor step(typename Base::LossClosure closure = nullptr) override {
    if (kernels_ == UpdateKernels::kForLoop) return Base::step(std::move(closure));
    torch::Tensor loss;
    if (closure) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    torch::NoGradGuard no_grad;
    for (auto& group : this->param_groups_) step_group(group);
    return loss;
  }

 private:
  // The tensors of one device and dtype, in parameter order.
  struct Lists {
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
    std::vector<State*> states;
  };

  void step_group(torch::optim::OptimizerParamGroup& group) {
    const auto& o = static_cast<const Options&>(group.options());
    std::vector<torch::Tensor> params;
    for (const auto& p : group.params())
      if (p.grad().defined()) {
        TORCH_CHECK(!p.grad().is_sparse(), "Adam does not support sparse gradients");
        params.push_back(p);
      }
    for (const auto& indices : group_by_device_and_dtype(params)) {
      Lists l;
      for (size_t i : indices) {
        const torch::Tensor& p = params[i];
        State& s = state_of(p, o.amsgrad());
        l.params.push_back(p);
        l.grads.push_back(p.grad());
        l.exp_avgs.push_back(s.exp_avg());
        l.exp_avg_sqs.push_back(s.exp_avg_sq());
        if (o.amsgrad()) l.max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
        l.states.push_back(&s);
      }
      if (kernels_ == UpdateKernels::kFused)
        fused(o, l);
      else
        multi_tensor(o, l);
    }
  }

  // As torch.optim's _init_group: zeros shaped and laid out like the parameter, the step count at 0.
  State& state_of(const torch::Tensor& p, bool amsgrad) {
    auto& slot = this->state_[p.unsafeGetTensorImpl()];
    if (!slot) {
      auto s = std::make_unique<State>();
      s->step(0);
      s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      slot = std::move(s);
    }
    auto& s = static_cast<State&>(*slot);
    if (amsgrad && !s.max_exp_avg_sq().defined()) s.max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    return s;
  }

  // torch.optim.adam._multi_tensor_adam with capturable=False (maximize false, real parameters): the step counts and
  // bias corrections on the host in double, as Python floats.
  void multi_tensor(const Options& o, const Lists& l) {
    const double lr = o.lr(), beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    std::vector<torch::Tensor> grads = l.grads;
    std::vector<c10::Scalar> step_size, bias_correction2_sqrt;
    for (State* s : l.states) {
      s->step(s->step() + 1);
      const auto step = static_cast<double>(s->step());
      const double bias_correction1 = 1 - std::pow(beta1, step), bias_correction2 = 1 - std::pow(beta2, step);
      step_size.emplace_back((lr / bias_correction1) * -1);
      bias_correction2_sqrt.emplace_back(std::pow(bias_correction2, 0.5));
    }
    if (o.weight_decay() != 0) {
      if (kDecoupled)
        at::_foreach_mul_(l.params, 1 - lr * o.weight_decay());
      else
        grads = at::_foreach_add(grads, l.params, o.weight_decay());
    }
    at::_foreach_lerp_(l.exp_avgs, grads, 1 - beta1);
    at::_foreach_mul_(l.exp_avg_sqs, beta2);
    at::_foreach_addcmul_(l.exp_avg_sqs, grads, grads, 1 - beta2);
    std::vector<torch::Tensor> denominator;
    if (o.amsgrad()) {
      at::_foreach_maximum_(l.max_exp_avg_sqs, l.exp_avg_sqs);
      denominator = at::_foreach_sqrt(l.max_exp_avg_sqs);
    } else {
      denominator = at::_foreach_sqrt(l.exp_avg_sqs);
    }
    at::_foreach_div_(denominator, bias_correction2_sqrt);
    at::_foreach_add_(denominator, o.eps());
    at::_foreach_addcdiv_(l.params, l.exp_avgs, denominator, step_size);
  }

  // torch.optim.adam._fused_adam: the step counts as float32 tensors on the parameters' device, advanced by one
  // before the kernel. They mirror LibTorch's integer counts (made again where a checkpoint load changed those).
  void fused(const Options& o, const Lists& l) {
    std::vector<torch::Tensor> steps;
    for (size_t i = 0; i < l.params.size(); ++i) {
      State& s = *l.states[i];
      auto& [count, tensor] = device_steps_[l.params[i].unsafeGetTensorImpl()];
      if (!tensor.defined() || count != s.step()) {
        tensor = torch::full({}, static_cast<double>(s.step()), l.params[i].options().dtype(torch::kFloat32));
        count = s.step();
      }
      s.step(s.step() + 1);
      ++count;
      steps.push_back(tensor);
    }
    at::_foreach_add_(steps, 1);
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    if (kDecoupled)
      at::_fused_adamw_(l.params, l.grads, l.exp_avgs, l.exp_avg_sqs, l.max_exp_avg_sqs, steps, o.lr(), beta1, beta2,
                        o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false);
    else
      at::_fused_adam_(l.params, l.grads, l.exp_avgs, l.exp_avg_sqs, l.max_exp_avg_sqs, steps, o.lr(), beta1, beta2,
                       o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false);
  }

  UpdateKernels kernels_;
  std::unordered_map<const void*, std::pair<int64_t, torch::Tensor>> device_steps_;  // fused: by parameter
};

template <class Optim, class Options, class State, bool kDecoupled>
std::unique_ptr<torch::optim::Optimizer> make_adam_like(const OptimizerConfig& cfg, double lr,
                                                        std::vector<torch::Tensor> params) {
  auto options =
      Options(lr).betas({cfg.beta1, cfg.beta2}).eps(cfg.eps).weight_decay(cfg.weight_decay).amsgrad(cfg.amsgrad);
  const UpdateKernels kernels = update_kernels(cfg, params);
  return std::make_unique<KernelAdam<Optim, Options, State, kDecoupled>>(std::move(params), options, kernels);
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_adam(const OptimizerConfig& cfg, double lr,
                                                   std::vector<torch::Tensor> params) {
  return make_adam_like<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState, false>(
      cfg, lr, std::move(params));
}

std::unique_ptr<torch::optim::Optimizer> make_adamw(const OptimizerConfig& cfg, double lr,
                                                    std::vector<torch::Tensor> params) {
  return make_adam_like<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState, true>(
      cfg, lr, std::move(params));
}

}  // namespace ddp
