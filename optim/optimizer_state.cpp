// Optimizer state to torch.optim's state_dict() form (state + param_groups), each optimizer writing its own entries
// (TorchStateForm), and the optimizer rows a param_groups entry may come from.
#include "optim/optimizer_state.h"

#include "optim/optimizer_kind.h"
#include "optim/param_state_access.h"
#include "optim/torch_state_form.h"

#include <torch/types.h>

#include <cmath>
#include <stdexcept>

namespace ddp {

std::vector<torch::Tensor> optimizer_params(const torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> out;
  for (const auto& g : opt.param_groups())
    for (const auto& p : g.params()) out.push_back(p);
  return out;
}

void* param_state_key(const torch::Tensor& p) { return p.unsafeGetTensorImpl(); }

c10::impl::GenericDict new_str_dict() { return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()); }

const c10::IValue& state_field(const c10::impl::GenericDict& fields, const std::string& key, const std::string& where) {
  auto it = fields.find(key);
  if (it == fields.end()) throw std::runtime_error(where + " has no \"" + key + "\" entry");
  return it->value();
}

int64_t state_step(const c10::impl::GenericDict& fields, const std::string& where) {
  const c10::IValue& v = state_field(fields, "step", where);
  double step = std::nan("");
  if (v.isDouble()) step = v.toDouble();
  if (v.isInt()) step = static_cast<double>(v.toInt());
  if (v.isTensor() && v.toTensor().numel() == 1) step = v.toTensor().item<double>();
  if (!(step >= 0) || step != std::floor(step) || step > 9e15)
    throw std::runtime_error(where + ".step is not a non-negative whole number");
  return static_cast<int64_t>(step);
}

torch::Tensor step_tensor(int64_t step) { return torch::scalar_tensor(static_cast<double>(step), torch::kFloat); }

torch::Tensor state_tensor_like(const c10::IValue& v, const torch::Tensor& like, const std::string& name) {
  if (!v.isTensor()) throw std::runtime_error("optimizer state " + name + " is not a tensor");
  torch::Tensor t = v.toTensor();
  if (t.sizes() != like.sizes())
    throw std::runtime_error("optimizer state " + name + " has shape " + c10::str(t.sizes()) + ", parameter has " +
                             c10::str(like.sizes()));
  return t.to(like.device(), like.scalar_type()).clone();
}

const TorchStateForm& torch_state_form(const torch::optim::Optimizer& opt) {
  const auto* form = dynamic_cast<const TorchStateForm*>(&opt);
  if (!form) throw std::logic_error("an optimizer without its torch.optim state_dict() form");
  return *form;
}

c10::impl::GenericDict optimizer_state_dict(const torch::optim::Optimizer& opt) {
  const TorchStateForm& form = torch_state_form(opt);
  c10::impl::GenericDict state(c10::IntType::get(), c10::AnyType::get());
  c10::impl::GenericList groups(c10::AnyType::get());
  int64_t index = 0;
  for (const auto& g : opt.param_groups()) {
    c10::impl::GenericDict entry = new_str_dict();
    entry.insert("lr", g.options().get_lr());
    for (const GroupField& f : form.group_fields(g.options())) entry.insert(f.key, f.value);
    c10::impl::GenericList ids(c10::AnyType::get());
    for (const auto& p : g.params()) {
      auto it = opt.state().find(param_state_key(p));
      if (it != opt.state().end()) {
        c10::impl::GenericDict fields = form.param_state_entry(*it->second);
        if (fields.size() > 0) state.insert(index, fields);
      }
      ids.push_back(index++);
    }
    entry.insert("params", ids);
    groups.push_back(entry);
  }
  c10::impl::GenericDict out = new_str_dict();
  out.insert("state", state);
  out.insert("param_groups", groups);
  return out;
}

std::vector<std::string> optimizers_from_param_groups(const c10::impl::GenericDict& state) {
  auto it = state.find("param_groups");
  if (it == state.end() || !it->value().isList() || it->value().toListRef().empty()) return {};
  const c10::IValue& first = it->value().toListRef()[0];
  if (!first.isGenericDict()) return {};
  std::vector<std::string> out;
  for (const OptimizerKind* kind : optimizer_kinds())
    if (kind->wrote(first.toGenericDict())) out.emplace_back(kind->keys.name);
  return out;
}

}  // namespace ddp
