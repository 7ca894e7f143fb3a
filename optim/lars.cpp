// optimizer.name = "lars": timm.optim.Lars (You et al., "Large Batch Training of Convolutional Networks", 2017; with
// NVIDIA APEX's LARC clipping): SGD whose step of each parameter is scaled by a layer-wise trust ratio, in timm's two
// implementations (_single_tensor_lars and _multi_tensor_lars, timm 1.0.31), its state in timm's state_dict() form,
// and its row.
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
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>

namespace ddp {
namespace {

// timm.optim.Lars's constructor arguments (dampening stays 0, as optimizer.name = "sgd" keeps it).
struct LarsOptions : public torch::optim::OptimizerCloneableOptions<LarsOptions> {
  explicit LarsOptions(double lr) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, momentum) = 0;
  TORCH_ARG(double, dampening) = 0;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(bool, nesterov) = false;
  TORCH_ARG(double, trust_coeff) = 0.001;
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(bool, trust_clip) = false;
  TORCH_ARG(bool, always_adapt) = false;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

// timm's state of a parameter: its momentum buffer, made at its first step (momentum != 0 only).
using LarsState = torch::optim::SGDParamState;

// timm.optim.lars._lars_trust_ratio: trust_coeff ||w|| / (||g|| + weight_decay ||w|| + eps), 1 where either norm is
// 0; with trust_clip (LARC) divided by lr and clipped at 1. Norms of one parameter, or stacked norms of several.
torch::Tensor lars_trust_ratio(const torch::Tensor& w_norm, const torch::Tensor& g_norm, const LarsOptions& o) {
  torch::Tensor ratio = o.trust_coeff() * w_norm / (g_norm + w_norm * o.weight_decay() + o.eps());
  ratio = at::where(w_norm > 0, at::where(g_norm > 0, ratio, 1.0), 1.0);
  if (o.trust_clip()) ratio = at::clamp(ratio / o.lr(), std::nullopt, 1.0);
  return ratio;
}

class Lars : public torch::optim::Optimizer, public TorchStateForm {
 public:
  Lars(const std::vector<ParamGroup>& groups, const LarsOptions& options, UpdateKernels kernels)
      : torch::optim::Optimizer(torch_param_groups(groups, options), std::make_unique<LarsOptions>(options)),
        kernels_(kernels) {}

  torch::Tensor step(LossClosure closure = nullptr) override {
    return step_with_closure(closure, [&] {
      for (auto& group : param_groups_) {
        const auto& o = static_cast<const LarsOptions&>(group.options());
        const std::vector<torch::Tensor> params = params_with_grad(group, "Lars");
        if (kernels_ == UpdateKernels::kForeach) {
          for (const auto& indices : group_by_device_and_dtype(params)) multi_tensor(o, pick(params, indices));
        } else {
          for_loop(o, params);
        }
      }
    });
  }

  // timm.optim.Lars's param_groups keys after "lr", in its order.
  std::vector<GroupField> group_fields(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const LarsOptions&>(options);
    return {{"momentum", o.momentum()},     {"dampening", o.dampening()},       {"weight_decay", o.weight_decay()},
            {"nesterov", o.nesterov()},     {"trust_coeff", o.trust_coeff()},   {"eps", o.eps()},
            {"trust_clip", o.trust_clip()}, {"always_adapt", o.always_adapt()}, {"foreach", c10::IValue(), false}};
  }
  c10::impl::GenericDict param_state_entry(const torch::optim::OptimizerParamState& state) const override {
    c10::impl::GenericDict out = new_str_dict();
    const auto& s = static_cast<const LarsState&>(state);
    if (s.momentum_buffer().defined()) out.insert("momentum_buffer", host_copy(s.momentum_buffer()));
    return out;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> param_state_from(const c10::impl::GenericDict& fields,
                                                                      const torch::Tensor& p,
                                                                      const std::string& where) const override {
    const c10::IValue& buf = state_field(fields, "momentum_buffer", where);
    if (buf.isNone()) return nullptr;
    auto s = std::make_unique<LarsState>();
    s->momentum_buffer(state_tensor_like(buf, p, where + ".momentum_buffer"));
    return s;
  }

 private:
  // timm.optim.lars._single_tensor_lars.
  void for_loop(const LarsOptions& o, const std::vector<torch::Tensor>& params) {
    for (const torch::Tensor& p : params) {
      torch::Tensor grad = p.grad();
      if (o.weight_decay() != 0 || o.always_adapt()) {
        const torch::Tensor ratio = lars_trust_ratio(p.norm(2.0), grad.norm(2.0), o);
        grad = grad.add(p, o.weight_decay()).mul_(ratio);  // not in place: p.grad stays as it is
      }
      if (o.momentum() != 0) {
        torch::Tensor buf;
        if (torch::Tensor* found = buffer_of(p)) {
          buf = *found;
          buf.mul_(python_number(o.momentum())).add_(grad, 1. - o.dampening());
        } else {
          buf = new_buffer(p, grad.clone().detach());
        }
        grad = o.nesterov() ? grad.add(buf, o.momentum()) : buf;
      }
      p.add_(grad, -o.lr());
    }
  }

  // timm.optim.lars._multi_tensor_lars (the trust ratios of one device and dtype in one stacked computation).
  void multi_tensor(const LarsOptions& o, const std::vector<torch::Tensor>& params) {
    if (params.empty()) return;
    std::vector<torch::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad());
    if (o.weight_decay() != 0 || o.always_adapt()) {
      const torch::Tensor ratios =
          lars_trust_ratio(at::stack(at::_foreach_norm(params)), at::stack(at::_foreach_norm(grads)), o);
      grads = at::_foreach_add(grads, params, o.weight_decay());  // not in place: the .grad stay as they are
      at::_foreach_mul_(grads, ratios.unbind(0));
    }
    if (o.momentum() != 0) {
      std::vector<torch::Tensor> existing_bufs, existing_grads;
      for (size_t i = 0; i < params.size(); ++i)
        if (torch::Tensor* buf = buffer_of(params[i])) {
          existing_bufs.push_back(*buf);
          existing_grads.push_back(grads[i]);
        }
      if (!existing_bufs.empty()) {
        at::_foreach_mul_(existing_bufs, o.momentum());
        at::_foreach_add_(existing_bufs, existing_grads, 1. - o.dampening());
      }
      std::vector<torch::Tensor> bufs;
      for (size_t i = 0; i < params.size(); ++i) {
        torch::Tensor* buf = buffer_of(params[i]);
        bufs.push_back(buf ? *buf : new_buffer(params[i], grads[i].clone().detach()));
      }
      grads = o.nesterov() ? at::_foreach_add(grads, bufs, o.momentum()) : bufs;
    }
    at::_foreach_add_(params, grads, -o.lr());
  }

  torch::Tensor* buffer_of(const torch::Tensor& p) {
    auto it = state_.find(p.unsafeGetTensorImpl());
    return it == state_.end() ? nullptr : &static_cast<LarsState&>(*it->second).momentum_buffer();
  }
  const torch::Tensor& new_buffer(const torch::Tensor& p, torch::Tensor buf) {
    auto state = std::make_unique<LarsState>();
    state->momentum_buffer(std::move(buf));
    auto& slot = state_[p.unsafeGetTensorImpl()];
    slot = std::move(state);
    return static_cast<LarsState&>(*slot).momentum_buffer();
  }

  UpdateKernels kernels_;
};

std::unique_ptr<torch::optim::Optimizer> make_lars(const OptimizerConfig& cfg, double lr,
                                                   const std::vector<ParamGroup>& groups) {
  const Hyperparameters& h = cfg.hyper;
  LarsOptions options(lr);
  options.momentum(h.number("momentum"))
      .weight_decay(h.number("weight_decay"))
      .nesterov(h.flag("nesterov"))
      .trust_coeff(h.number("trust_coeff"))
      .eps(h.number("eps"))
      .trust_clip(h.flag("trust_clip"))
      .always_adapt(h.flag("always_adapt"));
  return std::make_unique<Lars>(groups, options, update_kernels(cfg, grouped_params(groups)));
}

}  // namespace

const OptimizerKind& lars_optimizer() {
  static const OptimizerKind kind{
      {"lars",
       "timm.optim.Lars",
       {momentum_key("momentum factor"),
        weight_decay_key("L2 penalty, inside the trust ratio (a group without it is not adapted unless always_adapt)"),
        norm_weight_decay_key(), bias_weight_decay_key(), nesterov_key(),
        float_key(Key("trust_coeff",
                      "LARS trust coefficient: a layer's step scale is trust_coeff ||w|| / (||g|| + "
                      "weight_decay ||w|| + eps)")
                      .above(0)
                      .at_most(1),
                  0.001),
        eps_key("term added to the trust ratio's denominator"),
        bool_key(Key("trust_clip", "LARC: the trust ratio divided by lr and clipped at 1"), false),
        bool_key(Key("always_adapt", "adapt the step of groups without weight decay too (norms, biases)"), false)},
       /*has_fused=*/false,
       /*steps_on_device=*/steps_on_device_v<Lars>,
       check_nesterov},
      make_lars,
      [](const c10::impl::GenericDict& group) { return group.contains("trust_coeff"); }};
  return kind;
}

}  // namespace ddp
