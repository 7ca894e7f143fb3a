// optimizer.name = "sgd": SGD with momentum, dampening 0, nesterov and weight decay: torch.optim.SGD's three
// implementations (the per-parameter loop, foreach and fused) on LibTorch's SGD class (its options and momentum-buffer
// state), its state in torch.optim's form, and its row.
#include "optim/optimizer.h"

#include "base/capturable_step.h"
#include "base/foreach.h"
#include "base/host_copy.h"
#include "base/python_number.h"
#include "optim/hyperparameter_keys.h"
#include "optim/optimizer_kind.h"
#include "optim/param_state_access.h"
#include "optim/torch_state_form.h"
#include "optim/update_step.h"

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_fused_sgd.h>
#include <torch/optim/sgd.h>

namespace ddp {
namespace {

class KernelSGD : public torch::optim::SGD, public CapturableStep, public TorchStateForm {
 public:
  KernelSGD(const std::vector<ParamGroup>& groups, const torch::optim::SGDOptions& options, UpdateKernels kernels)
      : torch::optim::SGD(torch_param_groups(groups, options), options), kernels_(kernels) {}

  torch::Tensor step(LossClosure closure = nullptr) override {
    return step_with_closure(closure, [&] {
      for (auto& group : param_groups_) step_group(group, torch::Tensor());
    });
  }

  // The fused kernel takes found_inf (torch.optim's fused SGD has _step_supports_amp_scaling) and a tensor lr.
  bool capturable() const override { return kernels_ == UpdateKernels::kFused; }
  void read_lr_from(torch::Tensor lr) override {
    TORCH_CHECK(capturable() || !lr.defined(), "SGD reads its lr from a tensor with optimizer.fused only");
    lr_ = std::move(lr);
  }
  void step_unless_found_inf(const torch::Tensor& found_inf) override {
    TORCH_CHECK(capturable(), "SGD takes found_inf with optimizer.fused only");
    torch::NoGradGuard no_grad;
    for (auto& group : param_groups_) step_group(group, found_inf);
  }

  // torch.optim.SGD's param_groups keys after "lr", in its order.
  std::vector<GroupField> group_fields(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(options);
    return {{"momentum", o.momentum()},
            {"dampening", o.dampening()},
            {"weight_decay", o.weight_decay()},
            {"nesterov", o.nesterov()},
            {"maximize", false},
            {"foreach", c10::IValue(), false},
            {"differentiable", false, false},
            {"fused", c10::IValue(), false}};
  }
  c10::impl::GenericDict param_state_entry(const torch::optim::OptimizerParamState& state) const override {
    c10::impl::GenericDict out = new_str_dict();
    const auto& s = static_cast<const torch::optim::SGDParamState&>(state);
    if (s.momentum_buffer().defined()) out.insert("momentum_buffer", host_copy(s.momentum_buffer()));
    return out;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> param_state_from(const c10::impl::GenericDict& fields,
                                                                      const torch::Tensor& p,
                                                                      const std::string& where) const override {
    const c10::IValue& buf = state_field(fields, "momentum_buffer", where);
    if (buf.isNone()) return nullptr;  // torch's "no buffer yet": the next step starts one, as LibTorch's does
    auto s = std::make_unique<torch::optim::SGDParamState>();
    s->momentum_buffer(state_tensor_like(buf, p, where + ".momentum_buffer"));
    return s;
  }

 private:
  void step_group(torch::optim::OptimizerParamGroup& group, const torch::Tensor& found_inf) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    const std::vector<torch::Tensor> params = params_with_grad(group, "SGD");
    std::vector<torch::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad());
    for (const auto& indices : group_by_device_and_dtype(params)) {
      std::vector<torch::Tensor> device_params = pick(params, indices), device_grads = pick(grads, indices);
      if (kernels_ == UpdateKernels::kFused)
        fused(o, device_params, device_grads, found_inf);
      else if (kernels_ == UpdateKernels::kForeach)
        multi_tensor(o, device_params, device_grads);
      else
        for_loop(o, device_params, device_grads);
    }
  }

  // torch.optim.sgd._single_tensor_sgd (maximize false), its numbers passed as Python passes them.
  void for_loop(const torch::optim::SGDOptions& o, const std::vector<torch::Tensor>& params,
                const std::vector<torch::Tensor>& grads) {
    for (size_t i = 0; i < params.size(); ++i) {
      torch::Tensor grad = grads[i];
      if (o.weight_decay() != 0) grad = grad.add(params[i], o.weight_decay());
      if (o.momentum() != 0) {
        torch::Tensor buf;
        if (!state_.count(params[i].unsafeGetTensorImpl())) {
          buf = grad.detach().clone();
          new_buffer(params[i], buf);
        } else {
          buf = buffer_of(params[i]);
          buf.mul_(python_number(o.momentum())).add_(grad, 1 - o.dampening());
        }
        grad = o.nesterov() ? grad.add(buf, o.momentum()) : buf;
      }
      params[i].add_(grad, -o.lr());
    }
  }

  // torch.optim.sgd._multi_tensor_sgd (maximize false, dense gradients).
  void multi_tensor(const torch::optim::SGDOptions& o, const std::vector<torch::Tensor>& params,
                    std::vector<torch::Tensor> grads) {
    if (o.weight_decay() != 0) grads = at::_foreach_add(grads, params, o.weight_decay());
    if (o.momentum() != 0) {
      std::vector<torch::Tensor> bufs;
      bool all_have_buffers = true;
      for (const auto& p : params) all_have_buffers = all_have_buffers && state_.count(p.unsafeGetTensorImpl());
      if (all_have_buffers) {
        for (const auto& p : params) bufs.push_back(buffer_of(p));
        at::_foreach_mul_(bufs, o.momentum());
        at::_foreach_add_(bufs, grads, 1 - o.dampening());
      } else {
        for (size_t i = 0; i < params.size(); ++i) {
          auto found = state_.find(params[i].unsafeGetTensorImpl());
          torch::Tensor buf;
          if (found == state_.end()) {
            buf = grads[i].detach().clone();
            new_buffer(params[i], buf);
          } else {
            buf = buffer_of(params[i]);
            buf.mul_(o.momentum()).add_(grads[i], 1 - o.dampening());
          }
          bufs.push_back(buf);
        }
      }
      // As _multi_tensor_sgd: nesterov adds to the gradients in place (the parameters' .grad without weight decay).
      if (o.nesterov())
        at::_foreach_add_(grads, bufs, o.momentum());
      else
        grads = bufs;
    }
    at::_foreach_add_(params, grads, -o.lr());
  }

  // torch.optim.sgd._fused_sgd, with one difference: momentum buffers start as zeros and the kernel never takes
  // is_first_step. torch.optim starts them with empty_like and is_first_step=True (buf = grad); when a loss scaler's
  // found_inf skips that first step inside the kernel, the buffers stay uninitialised memory that later steps read.
  // With dampening 0, momentum x 0 + grad is the same first buffer, and a skipped first step leaves zeros.
  // found_inf (undefined: none) is moved to the parameters' device, as torch.optim does.
  void fused(const torch::optim::SGDOptions& o, const std::vector<torch::Tensor>& params,
             const std::vector<torch::Tensor>& grads, const torch::Tensor& found_inf) {
    std::vector<torch::Tensor> bufs;
    if (o.momentum() != 0) {
      for (const auto& p : params) {
        if (!state_.count(p.unsafeGetTensorImpl())) new_buffer(p, torch::zeros_like(p, torch::MemoryFormat::Preserve));
        bufs.push_back(buffer_of(p));
      }
    }
    std::optional<torch::Tensor> found;
    if (found_inf.defined()) found = found_inf.to(params.front().device(), /*non_blocking=*/true);
    if (lr_.defined())
      at::_fused_sgd_(params, grads, bufs, o.weight_decay(), o.momentum(), lr_, o.dampening(), o.nesterov(),
                      /*maximize=*/false, /*is_first_step=*/false, /*grad_scale=*/std::nullopt, found);
    else
      at::_fused_sgd_(params, grads, bufs, o.weight_decay(), o.momentum(), o.lr(), o.dampening(), o.nesterov(),
                      /*maximize=*/false, /*is_first_step=*/false, /*grad_scale=*/std::nullopt, found);
  }

  void new_buffer(const torch::Tensor& p, torch::Tensor buf) {
    auto state = std::make_unique<torch::optim::SGDParamState>();
    state->momentum_buffer(std::move(buf));
    state_[p.unsafeGetTensorImpl()] = std::move(state);
  }

  torch::Tensor& buffer_of(const torch::Tensor& p) {
    return static_cast<torch::optim::SGDParamState&>(*state_.at(p.unsafeGetTensorImpl())).momentum_buffer();
  }

  UpdateKernels kernels_;
  torch::Tensor lr_;  // read_lr_from's; undefined: the param group's lr
};

std::unique_ptr<torch::optim::Optimizer> make_sgd(const OptimizerConfig& cfg, double lr,
                                                  const std::vector<ParamGroup>& groups) {
  auto options = torch::optim::SGDOptions(lr)
                     .momentum(cfg.hyper.number("momentum"))
                     .weight_decay(cfg.hyper.number("weight_decay"))
                     .nesterov(cfg.hyper.flag("nesterov"))
                     .dampening(0);
  return std::make_unique<KernelSGD>(groups, options, update_kernels(cfg, grouped_params(groups)));
}

}  // namespace

const OptimizerKind& sgd_optimizer() {
  static const OptimizerKind kind{
      {"sgd",
       "torch.optim.SGD",
       {momentum_key("momentum factor"), weight_decay_key("L2 penalty"), norm_weight_decay_key(),
        bias_weight_decay_key(), nesterov_key()},
       /*has_fused=*/true,
       /*steps_on_device=*/steps_on_device_v<KernelSGD>,
       check_nesterov},
      make_sgd,
      // SGD's groups have dampening (RMSprop's have momentum too) and no eps (timm's Lars has both).
      [](const c10::impl::GenericDict& group) {
        return group.contains("momentum") && group.contains("dampening") && !group.contains("eps");
      }};
  return kind;
}

}  // namespace ddp
