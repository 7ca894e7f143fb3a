// optimizer.name = "rmsprop": torch.optim.RMSprop (alpha, eps, momentum, centered, weight_decay as an L2 penalty) in
// its two implementations, the per-parameter loop (_single_tensor_rmsprop) and foreach (_multi_tensor_rmsprop), on
// LibTorch's RMSprop class (its options and state); its state in torch.optim's form, and its row.
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
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_lerp.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_sqrt.h>
#include <torch/optim/rmsprop.h>

namespace ddp {
namespace {

using RMSpropState = torch::optim::RMSpropParamState;

class KernelRMSprop : public torch::optim::RMSprop, public TorchStateForm {
 public:
  KernelRMSprop(const std::vector<ParamGroup>& groups, const torch::optim::RMSpropOptions& options,
                UpdateKernels kernels)
      : torch::optim::RMSprop(torch_param_groups(groups, options), options), kernels_(kernels) {}

  torch::Tensor step(LossClosure closure = nullptr) override {
    return step_with_closure(closure, [&] {
      for (auto& group : param_groups_) step_group(group);
    });
  }

  // torch.optim.RMSprop's param_groups keys after "lr", in its order.
  std::vector<GroupField> group_fields(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const torch::optim::RMSpropOptions&>(options);
    return {{"momentum", o.momentum()},
            {"alpha", o.alpha()},
            {"eps", o.eps()},
            {"centered", o.centered()},
            {"weight_decay", o.weight_decay()},
            {"capturable", false, false},
            {"foreach", c10::IValue(), false},
            {"maximize", false},
            {"differentiable", false, false}};
  }
  c10::impl::GenericDict param_state_entry(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const RMSpropState&>(state);
    c10::impl::GenericDict out = new_str_dict();
    out.insert("step", step_tensor(s.step()));
    out.insert("square_avg", host_copy(s.square_avg()));
    if (s.momentum_buffer().defined()) out.insert("momentum_buffer", host_copy(s.momentum_buffer()));
    if (s.grad_avg().defined()) out.insert("grad_avg", host_copy(s.grad_avg()));
    return out;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> param_state_from(const c10::impl::GenericDict& fields,
                                                                      const torch::Tensor& p,
                                                                      const std::string& where) const override {
    auto s = std::make_unique<RMSpropState>();
    s->step(state_step(fields, where));
    s->square_avg(state_tensor_like(state_field(fields, "square_avg", where), p, where + ".square_avg"));
    if (auto it = fields.find("momentum_buffer"); it != fields.end())
      s->momentum_buffer(state_tensor_like(it->value(), p, where + ".momentum_buffer"));
    if (auto it = fields.find("grad_avg"); it != fields.end())
      s->grad_avg(state_tensor_like(it->value(), p, where + ".grad_avg"));
    return s;
  }

 private:
  // The tensors of one device and dtype, in parameter order.
  struct Lists {
    std::vector<torch::Tensor> params, grads, square_avgs, grad_avgs, momentum_buffers;
  };

  void step_group(torch::optim::OptimizerParamGroup& group) {
    const auto& o = static_cast<const torch::optim::RMSpropOptions&>(group.options());
    const std::vector<torch::Tensor> params = params_with_grad(group, "RMSprop");
    for (const auto& indices : group_by_device_and_dtype(params)) {
      Lists l;
      for (size_t i : indices) {
        const torch::Tensor& p = params[i];
        RMSpropState& s = state_of(p, o);
        s.step(s.step() + 1);
        l.params.push_back(p);
        l.grads.push_back(p.grad());
        l.square_avgs.push_back(s.square_avg());
        if (o.centered()) l.grad_avgs.push_back(s.grad_avg());
        if (o.momentum() > 0) l.momentum_buffers.push_back(s.momentum_buffer());
      }
      if (kernels_ == UpdateKernels::kForeach)
        multi_tensor(o, l);
      else
        for_loop(o, l);
    }
  }

  // As torch.optim's _init_group: zeros shaped and laid out like the parameter, the step count at 0; a buffer the
  // options now need but a loaded state lacks starts as zeros too.
  RMSpropState& state_of(const torch::Tensor& p, const torch::optim::RMSpropOptions& o) {
    auto& slot = state_[p.unsafeGetTensorImpl()];
    auto zeros = [&] { return torch::zeros_like(p, torch::MemoryFormat::Preserve); };
    if (!slot) {
      auto s = std::make_unique<RMSpropState>();
      s->step(0);
      s->square_avg(zeros());
      slot = std::move(s);
    }
    auto& s = static_cast<RMSpropState&>(*slot);
    if (o.momentum() > 0 && !s.momentum_buffer().defined()) s.momentum_buffer(zeros());
    if (o.centered() && !s.grad_avg().defined()) s.grad_avg(zeros());
    return s;
  }

  // torch.optim.rmsprop._single_tensor_rmsprop (maximize false, real parameters), its numbers passed as Python
  // passes them.
  static void for_loop(const torch::optim::RMSpropOptions& o, const Lists& l) {
    const double alpha = o.alpha();
    for (size_t i = 0; i < l.params.size(); ++i) {
      torch::Tensor param = l.params[i], grad = l.grads[i], square_avg = l.square_avgs[i];
      if (o.weight_decay() != 0) grad = grad.add(param, o.weight_decay());
      square_avg.mul_(python_number(alpha)).addcmul_(grad, grad, 1 - alpha);
      torch::Tensor avg;
      if (o.centered()) {
        torch::Tensor grad_avg = l.grad_avgs[i];
        grad_avg.lerp_(grad, 1 - alpha);
        avg = square_avg.addcmul(grad_avg, grad_avg, -1).sqrt_();
      } else {
        avg = square_avg.sqrt();
      }
      avg = avg.add_(python_number(o.eps()));
      if (o.momentum() > 0) {
        torch::Tensor buf = l.momentum_buffers[i];
        buf.mul_(python_number(o.momentum())).addcdiv_(grad, avg);
        param.add_(buf, -o.lr());
      } else {
        param.addcdiv_(grad, avg, -o.lr());
      }
    }
  }

  // torch.optim.rmsprop._multi_tensor_rmsprop (maximize false, capturable false, real parameters).
  static void multi_tensor(const torch::optim::RMSpropOptions& o, const Lists& l) {
    const double alpha = o.alpha();
    std::vector<torch::Tensor> grads = l.grads;
    if (o.weight_decay() != 0) grads = at::_foreach_add(grads, l.params, o.weight_decay());
    at::_foreach_mul_(l.square_avgs, alpha);
    at::_foreach_addcmul_(l.square_avgs, grads, grads, 1 - alpha);
    std::vector<torch::Tensor> avg;
    if (o.centered()) {
      at::_foreach_lerp_(l.grad_avgs, grads, 1 - alpha);
      avg = at::_foreach_addcmul(l.square_avgs, l.grad_avgs, l.grad_avgs, -1);
      at::_foreach_sqrt_(avg);
    } else {
      avg = at::_foreach_sqrt(l.square_avgs);
    }
    at::_foreach_add_(avg, o.eps());
    if (o.momentum() > 0) {
      at::_foreach_mul_(l.momentum_buffers, o.momentum());
      at::_foreach_addcdiv_(l.momentum_buffers, grads, avg);
      at::_foreach_add_(l.params, l.momentum_buffers, -o.lr());
    } else {
      at::_foreach_addcdiv_(l.params, grads, avg, -o.lr());
    }
  }

  UpdateKernels kernels_;
};

std::unique_ptr<torch::optim::Optimizer> make_rmsprop(const OptimizerConfig& cfg, double lr,
                                                      const std::vector<ParamGroup>& groups) {
  const Hyperparameters& h = cfg.hyper;
  auto options = torch::optim::RMSpropOptions(lr)
                     .alpha(h.number("alpha"))
                     .eps(h.number("eps"))
                     .weight_decay(h.number("weight_decay"))
                     .momentum(h.number("momentum"))
                     .centered(h.flag("centered"));
  return std::make_unique<KernelRMSprop>(groups, options, update_kernels(cfg, grouped_params(groups)));
}

}  // namespace

const OptimizerKind& rmsprop_optimizer() {
  static const OptimizerKind kind{
      {"rmsprop",
       "torch.optim.RMSprop",
       {momentum_key("momentum factor"),
        float_key(Key("alpha", "smoothing constant of the squared-gradient average").at_least(0).at_most(1), 0.99),
        eps_key("term added to the denominator"), weight_decay_key("L2 penalty"), norm_weight_decay_key(),
        bias_weight_decay_key(),
        bool_key(Key("centered", "centered RMSprop: gradients normalised by an estimate of their variance"), false)},
       /*has_fused=*/false,
       /*steps_on_device=*/steps_on_device_v<KernelRMSprop>,
       nullptr},
      make_rmsprop,
      [](const c10::impl::GenericDict& group) { return group.contains("alpha") && group.contains("centered"); }};
  return kind;
}

}  // namespace ddp
