// optimizer.name = "lamb": timm.optim.Lamb (You et al., "Large Batch Optimization for Deep Learning: Training BERT in
// 76 minutes", 2019; the NVLAMB variant of APEX's FusedLAMB, with its global gradient-norm clipping): Adam's moments
// with a layer-wise trust ratio, as timm 1.0.31's per-parameter implementation (_single_tensor_lamb); its state in
// timm's state_dict() form (the step count kept in each param group), and its row.
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

#include <ATen/core/ivalue.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <torch/optim/optimizer.h>

#include <cmath>

namespace ddp {
namespace {

// timm.optim.Lamb's constructor arguments ddptrain takes (caution, decoupled_decay and corrected_weight_decay stay
// off), max_lr_snapshot (the constructor's lr) and the group's step count, which timm keeps in the param group.
struct LambOptions : public torch::optim::OptimizerCloneableOptions<LambOptions> {
  explicit LambOptions(double lr) : lr_(lr), max_lr_snapshot_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(bool, bias_correction) = true;
  TORCH_ARG(double, beta1) = 0.9;
  TORCH_ARG(double, beta2) = 0.999;
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(double, weight_decay) = 0.01;
  TORCH_ARG(bool, grad_averaging) = true;
  TORCH_ARG(double, max_grad_norm) = 1.0;  // 0: None, no clipping
  TORCH_ARG(bool, trust_clip) = false;
  TORCH_ARG(bool, always_adapt) = false;
  TORCH_ARG(double, max_lr_snapshot);
  TORCH_ARG(int64_t, step) = 0;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct LambState : public torch::optim::OptimizerCloneableParamState<LambState> {
  TORCH_ARG(torch::Tensor, exp_avg);
  TORCH_ARG(torch::Tensor, exp_avg_sq);
};

// timm.optim.lamb._lamb_trust_ratio: ||w|| / ||update||, 1 where either norm is 0; clipped at 1 with trust_clip.
torch::Tensor lamb_trust_ratio(const torch::Tensor& w_norm, const torch::Tensor& g_norm, bool trust_clip) {
  torch::Tensor ratio = w_norm / g_norm;
  ratio = at::where(w_norm > 0, at::where(g_norm > 0, ratio, 1.0), 1.0);
  if (trust_clip) ratio = at::clamp(ratio, std::nullopt, 1.0);
  return ratio;
}

class Lamb : public torch::optim::Optimizer, public TorchStateForm {
 public:
  Lamb(const std::vector<ParamGroup>& groups, const LambOptions& options)
      : torch::optim::Optimizer(torch_param_groups(groups, options), std::make_unique<LambOptions>(options)) {}

  // timm.optim.Lamb.step: every group's step count advances, groups without gradients then stay as they are.
  torch::Tensor step(LossClosure closure = nullptr) override {
    return step_with_closure(closure, [&] {
      const torch::Tensor clip = clip_grad_norm();
      for (auto& group : param_groups_) {
        auto& o = static_cast<LambOptions&>(group.options());
        o.step(o.step() + 1);
        const std::vector<torch::Tensor> params = params_with_grad(group, "Lamb");
        if (!params.empty()) for_loop(o, params, clip);
      }
    });
  }

  // timm.optim.Lamb's param_groups keys after "lr", in its order; "step" from the first step on.
  std::vector<GroupField> group_fields(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const LambOptions&>(options);
    std::vector<GroupField> fields{
        {"bias_correction", o.bias_correction()},
        {"betas", c10::ivalue::Tuple::create({o.beta1(), o.beta2()})},
        {"eps", o.eps()},
        {"weight_decay", o.weight_decay()},
        {"grad_averaging", o.grad_averaging()},
        {"max_grad_norm", o.max_grad_norm() == 0 ? c10::IValue() : c10::IValue(o.max_grad_norm())},
        {"trust_clip", o.trust_clip()},
        {"always_adapt", o.always_adapt()},
        {"caution", false},
        {"decoupled_decay", false},
        {"corrected_weight_decay", false},
        {"max_lr_snapshot", o.max_lr_snapshot(), false},
        {"foreach", c10::IValue(), false}};
    if (o.step() > 0) fields.push_back({"step", step_tensor(o.step()), false});
    return fields;
  }
  void group_state_from(const c10::impl::GenericDict& group, torch::optim::OptimizerOptions& options,
                        const std::string& where) const override {
    auto& o = static_cast<LambOptions&>(options);
    o.step(group.contains("step") ? state_step(group, where) : 0);
    if (auto it = group.find("max_lr_snapshot"); it != group.end() && it->value().isDouble())
      o.max_lr_snapshot(it->value().toDouble());
  }
  c10::impl::GenericDict param_state_entry(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const LambState&>(state);
    c10::impl::GenericDict out = new_str_dict();
    out.insert("exp_avg", host_copy(s.exp_avg()));
    out.insert("exp_avg_sq", host_copy(s.exp_avg_sq()));
    return out;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> param_state_from(const c10::impl::GenericDict& fields,
                                                                      const torch::Tensor& p,
                                                                      const std::string& where) const override {
    auto s = std::make_unique<LambState>();
    s->exp_avg(state_tensor_like(state_field(fields, "exp_avg", where), p, where + ".exp_avg"));
    s->exp_avg_sq(state_tensor_like(state_field(fields, "exp_avg_sq", where), p, where + ".exp_avg_sq"));
    return s;
  }

 private:
  // timm.optim.Lamb._get_clip_grad_norm: max(1, ||all gradients|| / max_grad_norm) (the norm of the per-parameter
  // norms), the divisor of every gradient; undefined without max_grad_norm or gradients.
  torch::Tensor clip_grad_norm() const {
    const auto& d = static_cast<const LambOptions&>(defaults());
    if (d.max_grad_norm() == 0) return {};
    std::vector<torch::Tensor> grads;
    for (const auto& group : param_groups_)
      for (const torch::Tensor& p : params_with_grad(group, "Lamb")) grads.push_back(p.grad());
    if (grads.empty()) return {};
    const torch::Tensor global_norm = at::linalg_vector_norm(at::stack(at::_foreach_norm(grads)));
    return (global_norm / d.max_grad_norm()).clamp_(1.0);
  }

  // timm.optim.lamb._single_tensor_lamb (caution and decoupled decay off), its numbers passed as Python passes them.
  void for_loop(const LambOptions& o, const std::vector<torch::Tensor>& params, const torch::Tensor& clip) {
    const double step = static_cast<double>(o.step());
    double bias_correction1 = 1.0, bias_correction2 = 1.0;
    if (o.bias_correction()) {
      bias_correction1 = 1 - std::pow(o.beta1(), step);
      bias_correction2 = 1 - std::pow(o.beta2(), step);
    }
    const double beta3 = o.grad_averaging() ? 1 - o.beta1() : 1.0;
    for (const torch::Tensor& p : params) {
      LambState& s = state_of(p);
      torch::Tensor grad = p.grad();
      if (clip.defined()) grad = grad / clip;  // not in place: p.grad stays as it is
      if (beta3 == 1 - o.beta1())
        s.exp_avg().lerp_(grad, beta3);
      else
        s.exp_avg().mul_(python_number(o.beta1())).add_(grad, beta3);
      s.exp_avg_sq().mul_(python_number(o.beta2())).addcmul_(grad, grad, 1 - o.beta2());
      const torch::Tensor denom =
          (s.exp_avg_sq().sqrt() / std::pow(bias_correction2, 0.5)).add_(python_number(o.eps()));
      torch::Tensor update = (s.exp_avg() / bias_correction1).div_(denom);
      if (o.weight_decay() != 0) update.add_(p, o.weight_decay());
      if (o.weight_decay() != 0 || o.always_adapt())
        update.mul_(lamb_trust_ratio(p.norm(2.0), update.norm(2.0), o.trust_clip()));
      p.add_(update, -o.lr());
    }
  }

  // torch.zeros_like moments at a parameter's first step, as timm's step.
  LambState& state_of(const torch::Tensor& p) {
    auto& slot = state_[p.unsafeGetTensorImpl()];
    if (!slot) {
      auto s = std::make_unique<LambState>();
      s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      slot = std::move(s);
    }
    return static_cast<LambState&>(*slot);
  }
};

std::unique_ptr<torch::optim::Optimizer> make_lamb(const OptimizerConfig& cfg, double lr,
                                                   const std::vector<ParamGroup>& groups) {
  const Hyperparameters& h = cfg.hyper;
  LambOptions options(lr);
  options.bias_correction(h.flag("bias_correction"))
      .beta1(h.number("beta1"))
      .beta2(h.number("beta2"))
      .eps(h.number("eps"))
      .weight_decay(h.number("weight_decay"))
      .grad_averaging(h.flag("grad_averaging"))
      .max_grad_norm(h.number("max_grad_norm"))
      .trust_clip(h.flag("trust_clip"))
      .always_adapt(h.flag("always_adapt"));
  return std::make_unique<Lamb>(groups, options);
}

std::optional<BrokenRule> check_lamb(const OptimizerConfig& cfg) {
  if (cfg.foreach == Foreach::On)
    return BrokenRule{{"optimizer.foreach"},
                      "optimizer.name = \"lamb\" runs timm's per-parameter implementation only; set optimizer.foreach "
                      "= \"auto\" or \"off\""};
  return std::nullopt;
}

}  // namespace

const OptimizerKind& lamb_optimizer() {
  static const OptimizerKind kind{
      {"lamb",
       "timm.optim.Lamb",
       {float_key(Key("beta1", "first moment decay").at_least(0).below(1), 0.9),
        float_key(Key("beta2", "second moment decay").at_least(0).below(1), 0.999),
        eps_key("term added to the denominator"),
        weight_decay_key("L2 penalty added to the update before its trust ratio (a group without it is not adapted "
                         "unless always_adapt)"),
        norm_weight_decay_key(), bias_weight_decay_key(),
        bool_key(Key("bias_correction", "Adam's bias correction of the moments"), true),
        bool_key(Key("grad_averaging", "the first moment averages gradients with weight 1 - beta1 (else 1)"), true),
        float_key(Key("max_grad_norm",
                      "the gradients' global norm is clipped to this inside the step, as timm's "
                      "Lamb (0: no clipping)")
                      .at_least(0)
                      .at_most(1e6),
                  1.0),
        bool_key(Key("trust_clip", "LAMBC: the trust ratio clipped at 1"), false),
        bool_key(Key("always_adapt", "adapt the step of groups without weight decay too (norms, biases)"), false)},
       /*has_fused=*/false,
       /*steps_on_device=*/steps_on_device_v<Lamb>,
       check_lamb},
      make_lamb,
      [](const c10::impl::GenericDict& group) {
        return group.contains("grad_averaging") && group.contains("bias_correction");
      }};
  return kind;
}

}  // namespace ddp
