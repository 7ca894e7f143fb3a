// Optimizer state to torch.optim's state_dict() form (state + param_groups) for LibTorch's SGD, AdamW and Adam.
#include "optim/optimizer_state.h"
#include "optim/adam_family.h"
#include "optim/param_state_access.h"

#include <torch/optim/sgd.h>

#include <stdexcept>

namespace ddp {

std::vector<torch::Tensor> optimizer_params(const torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> out;
  for (const auto& g : opt.param_groups())
    for (const auto& p : g.params()) out.push_back(p);
  return out;
}

void* param_state_key(const torch::Tensor& p) { return p.unsafeGetTensorImpl(); }

torch::Tensor state_tensor_like(const c10::IValue& v, const torch::Tensor& like, const std::string& name) {
  if (!v.isTensor()) throw std::runtime_error("optimizer state " + name + " is not a tensor");
  torch::Tensor t = v.toTensor();
  if (t.sizes() != like.sizes())
    throw std::runtime_error("optimizer state " + name + " has shape " + c10::str(t.sizes()) + ", parameter has " +
                             c10::str(like.sizes()));
  return t.to(like.device(), like.scalar_type()).clone();
}

namespace {

using OptimStrDict = c10::impl::GenericDict;

OptimStrDict new_optim_str_dict() { return OptimStrDict(c10::StringType::get(), c10::AnyType::get()); }

// torch 2.11's param_groups entry for SGD / AdamW / Adam with these options, keys in torch's order, "params" last.
OptimStrDict param_group_entry(const torch::optim::OptimizerOptions& options) {
  OptimStrDict g = new_optim_str_dict();
  g.insert("lr", options.get_lr());
  if (auto* s = dynamic_cast<const torch::optim::SGDOptions*>(&options)) {
    g.insert("momentum", s->momentum());
    g.insert("dampening", s->dampening());
    g.insert("weight_decay", s->weight_decay());
    g.insert("nesterov", s->nesterov());
    g.insert("maximize", false);
    g.insert("foreach", c10::IValue());
    g.insert("differentiable", false);
    g.insert("fused", c10::IValue());
  } else if (!with_adam_options(options, [&](const auto& a, bool decoupled) {
               for (const GroupField& f : adam_group_fields(a, decoupled)) g.insert(f.key, f.value);
             })) {
    throw std::runtime_error("optimizer state of an unsupported optimizer");
  }
  return g;
}

OptimStrDict param_state_entry(const torch::optim::OptimizerParamState& state) {
  OptimStrDict out = new_optim_str_dict();
  if (auto* s = dynamic_cast<const torch::optim::SGDParamState*>(&state)) {
    if (s->momentum_buffer().defined()) out.insert("momentum_buffer", s->momentum_buffer().clone());
  } else if (!with_adam_state(state, [&](const auto& a) {
               // torch keeps the step count as a float32 0-dim tensor.
               out.insert("step", torch::scalar_tensor(static_cast<double>(a.step()), torch::kFloat));
               out.insert("exp_avg", a.exp_avg().clone());
               out.insert("exp_avg_sq", a.exp_avg_sq().clone());
               if (a.max_exp_avg_sq().defined()) out.insert("max_exp_avg_sq", a.max_exp_avg_sq().clone());
             })) {
    throw std::runtime_error("optimizer state of an unsupported optimizer");
  }
  return out;
}

}  // namespace

c10::impl::GenericDict optimizer_state_dict(const torch::optim::Optimizer& opt) {
  c10::impl::GenericDict state(c10::IntType::get(), c10::AnyType::get());
  c10::impl::GenericList groups(c10::AnyType::get());
  int64_t index = 0;
  for (const auto& g : opt.param_groups()) {
    OptimStrDict entry = param_group_entry(g.options());
    c10::impl::GenericList ids(c10::AnyType::get());
    for (const auto& p : g.params()) {
      auto it = opt.state().find(param_state_key(p));
      if (it != opt.state().end()) {
        OptimStrDict fields = param_state_entry(*it->second);
        if (fields.size() > 0) state.insert(index, fields);
      }
      ids.push_back(index++);
    }
    entry.insert("params", ids);
    groups.push_back(entry);
  }
  OptimStrDict out = new_optim_str_dict();
  out.insert("state", state);
  out.insert("param_groups", groups);
  return out;
}

std::vector<OptimizerName> optimizers_from_param_groups(const c10::impl::GenericDict& state) {
  auto it = state.find("param_groups");
  if (it == state.end() || !it->value().isList() || it->value().toListRef().empty()) return {};
  const c10::IValue& first = it->value().toListRef()[0];
  if (!first.isGenericDict()) return {};
  const auto group = first.toGenericDict();
  if (group.contains("betas")) {
    auto decoupled = group.find("decoupled_weight_decay");
    if (decoupled == group.end() || !decoupled->value().isBool()) return {OptimizerName::Adam, OptimizerName::AdamW};
    return {decoupled->value().toBool() ? OptimizerName::AdamW : OptimizerName::Adam};
  }
  if (group.contains("momentum")) return {OptimizerName::Sgd};
  return {};
}

}  // namespace ddp
