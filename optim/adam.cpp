// optimizer.name = "adam" and "adamw": torch.optim.Adam (L2 weight decay added to the gradient) and AdamW (decoupled
// weight decay) from the same optimizer.* keys, in torch.optim's three implementations on LibTorch's classes (their
// options and state): the per-parameter loop (LibTorch's own step), foreach (_multi_tensor_adam) and fused
// (_fused_adam_, _fused_adamw_); their state in torch.optim's form (torch 2.11's AdamW is Adam with
// decoupled_weight_decay=True: the same keys), and their rows.
#include "optim/optimizer.h"

#include "base/capturable_step.h"
#include "base/foreach.h"
#include "base/host_copy.h"
#include "optim/hyperparameter_keys.h"
#include "optim/optimizer_kind.h"
#include "optim/param_state_access.h"
#include "optim/torch_state_form.h"
#include "optim/update_step.h"

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
class KernelAdam : public Base, public TorchStateForm {
 public:
  KernelAdam(const std::vector<ParamGroup>& groups, const Options& options, UpdateKernels kernels)
      : Base(torch_param_groups(groups, options), options), kernels_(kernels) {}

  torch::Tensor step(typename Base::LossClosure closure = nullptr) override {
    if (kernels_ == UpdateKernels::kForLoop) return Base::step(std::move(closure));
    return step_with_closure(closure, [&] {
      for (auto& group : this->param_groups_) step_group(group);
    });
  }

  // torch.optim.Adam's param_groups keys after "lr", in its order.
  std::vector<GroupField> group_fields(const torch::optim::OptimizerOptions& options) const override {
    const auto& a = static_cast<const Options&>(options);
    return {{"betas", c10::ivalue::Tuple::create({std::get<0>(a.betas()), std::get<1>(a.betas())})},
            {"eps", a.eps()},
            {"weight_decay", a.weight_decay()},
            {"amsgrad", a.amsgrad()},
            {"maximize", false},
            {"foreach", c10::IValue(), false},
            {"capturable", false, false},
            {"differentiable", false, false},
            {"fused", c10::IValue(), false},
            {"decoupled_weight_decay", kDecoupled}};
  }
  c10::impl::GenericDict param_state_entry(const torch::optim::OptimizerParamState& state) const override {
    const auto& a = static_cast<const State&>(state);
    c10::impl::GenericDict out = new_str_dict();
    out.insert("step", step_tensor(a.step()));
    out.insert("exp_avg", host_copy(a.exp_avg()));
    out.insert("exp_avg_sq", host_copy(a.exp_avg_sq()));
    if (a.max_exp_avg_sq().defined()) out.insert("max_exp_avg_sq", host_copy(a.max_exp_avg_sq()));
    return out;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> param_state_from(const c10::impl::GenericDict& fields,
                                                                      const torch::Tensor& p,
                                                                      const std::string& where) const override {
    auto s = std::make_unique<State>();
    s->step(state_step(fields, where));
    s->exp_avg(state_tensor_like(state_field(fields, "exp_avg", where), p, where + ".exp_avg"));
    s->exp_avg_sq(state_tensor_like(state_field(fields, "exp_avg_sq", where), p, where + ".exp_avg_sq"));
    auto amsgrad = fields.find("max_exp_avg_sq");
    if (amsgrad != fields.end()) s->max_exp_avg_sq(state_tensor_like(amsgrad->value(), p, where + ".max_exp_avg_sq"));
    return s;
  }

 private:
  // The tensors of one device and dtype, in parameter order.
  struct Lists {
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
    std::vector<State*> states;
  };

  void step_group(torch::optim::OptimizerParamGroup& group) {
    const auto& o = static_cast<const Options&>(group.options());
    const std::vector<torch::Tensor> params = params_with_grad(group, "Adam");
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

using KernelAdamW = KernelAdam<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState, true>;
using KernelAdamL2 = KernelAdam<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState, false>;

template <class Kernel, class Options>
std::unique_ptr<torch::optim::Optimizer> make_adam_like(const OptimizerConfig& cfg, double lr,
                                                        const std::vector<ParamGroup>& groups) {
  const Hyperparameters& h = cfg.hyper;
  auto options = Options(lr)
                     .betas({h.number("beta1"), h.number("beta2")})
                     .eps(h.number("eps"))
                     .weight_decay(h.number("weight_decay"))
                     .amsgrad(h.flag("amsgrad"));
  return std::make_unique<Kernel>(groups, options, update_kernels(cfg, grouped_params(groups)));
}

// The keys of Adam and AdamW; only weight_decay's meaning differs.
std::vector<HyperparameterKey> adam_keys(const char* weight_decay_doc) {
  return {float_key(Key("beta1", "first moment decay").at_least(0).below(1), 0.9),
          float_key(Key("beta2", "second moment decay").at_least(0).below(1), 0.999),
          eps_key("term added to the denominator"),
          weight_decay_key(weight_decay_doc),
          norm_weight_decay_key(),
          bias_weight_decay_key(),
          bool_key(Key("amsgrad", "AMSGrad, steps scaled by the largest second-moment average so far"), false)};
}

// Adam's groups have betas and amsgrad (timm's Lamb has betas only); a torch from before decoupled_weight_decay wrote
// the same groups for Adam and AdamW, so such a group may be either's.
template <bool kDecoupled>
bool wrote_adam(const c10::impl::GenericDict& group) {
  if (!group.contains("betas") || !group.contains("amsgrad")) return false;
  auto decoupled = group.find("decoupled_weight_decay");
  return decoupled == group.end() || !decoupled->value().isBool() || decoupled->value().toBool() == kDecoupled;
}

}  // namespace

const OptimizerKind& adamw_optimizer() {
  static const OptimizerKind kind{
      {"adamw", "torch.optim.AdamW", adam_keys("decoupled weight decay"), /*has_fused=*/true,
       /*steps_on_device=*/steps_on_device_v<KernelAdamW>, nullptr},
      make_adam_like<KernelAdamW, torch::optim::AdamWOptions>,
      wrote_adam<true>};
  return kind;
}

const OptimizerKind& adam_optimizer() {
  static const OptimizerKind kind{{"adam", "torch.optim.Adam", adam_keys("L2 penalty"), /*has_fused=*/true,
                                   /*steps_on_device=*/steps_on_device_v<KernelAdamL2>, nullptr},
                                  make_adam_like<KernelAdamL2, torch::optim::AdamOptions>,
                                  wrote_adam<false>};
  return kind;
}

}  // namespace ddp
