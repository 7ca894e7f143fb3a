// Optimizer state (de)serialisation for LibTorch's SGD and AdamW, keyed by parameter index.
#include "optim/optimizer_state.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <map>
#include <stdexcept>

namespace ddp {
namespace {

std::vector<torch::Tensor> all_params(const torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> out;
  for (const auto& g : opt.param_groups())
    for (const auto& p : g.params()) out.push_back(p);
  return out;
}

// LibTorch keys optimizer state by the parameter's TensorImpl address.
void* state_key(const torch::Tensor& p) { return p.unsafeGetTensorImpl(); }

torch::Tensor copy_checked(const c10::IValue& v, const torch::Tensor& like, const std::string& key) {
  if (!v.isTensor()) throw std::runtime_error("optimizer state " + key + " is not a tensor");
  torch::Tensor t = v.toTensor();
  if (t.sizes() != like.sizes())
    throw std::runtime_error("optimizer state " + key + " has shape " + c10::str(t.sizes()) + ", parameter has " +
                             c10::str(like.sizes()));
  return t.to(like.device(), like.scalar_type()).clone();
}

}  // namespace

c10::impl::GenericDict optimizer_state_dict(const torch::optim::Optimizer& opt) {
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  auto params = all_params(opt);
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = opt.state().find(state_key(params[i]));
    if (it == opt.state().end()) continue;
    const std::string prefix = std::to_string(i) + ".";
    if (auto* s = dynamic_cast<const torch::optim::SGDParamState*>(it->second.get())) {
      if (s->momentum_buffer().defined()) out.insert(prefix + "momentum_buffer", s->momentum_buffer().clone());
    } else if (auto* a = dynamic_cast<const torch::optim::AdamWParamState*>(it->second.get())) {
      out.insert(prefix + "step", a->step());
      out.insert(prefix + "exp_avg", a->exp_avg().clone());
      out.insert(prefix + "exp_avg_sq", a->exp_avg_sq().clone());
      if (a->max_exp_avg_sq().defined()) out.insert(prefix + "max_exp_avg_sq", a->max_exp_avg_sq().clone());
    } else {
      throw std::runtime_error("optimizer state of an unsupported optimizer");
    }
  }
  return out;
}

void load_optimizer_state_dict(torch::optim::Optimizer& opt, const c10::impl::GenericDict& state) {
  auto params = all_params(opt);
  const bool adamw = dynamic_cast<torch::optim::AdamW*>(&opt) != nullptr;
  std::map<size_t, std::map<std::string, c10::IValue>> by_param;
  for (const auto& item : state) {
    const std::string key = item.key().toStringRef();
    const size_t dot = key.find('.');
    size_t index = 0;
    try {
      index = std::stoul(key.substr(0, dot));
    } catch (const std::exception&) {
      throw std::runtime_error("optimizer state key " + key + " is not <index>.<field>");
    }
    if (dot == std::string::npos || index >= params.size())
      throw std::runtime_error("optimizer state key " + key + " does not match the model's " +
                               std::to_string(params.size()) + " parameters");
    by_param[index][key.substr(dot + 1)] = item.value();
  }
  opt.state().clear();
  for (auto& [index, fields] : by_param) {
    const torch::Tensor& p = params[index];
    const std::string prefix = std::to_string(index) + ".";
    if (adamw) {
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      for (const char* need : {"step", "exp_avg", "exp_avg_sq"})
        if (!fields.count(need)) throw std::runtime_error("optimizer state " + prefix + need + " is missing");
      s->step(fields.at("step").toInt());
      s->exp_avg(copy_checked(fields.at("exp_avg"), p, prefix + "exp_avg"));
      s->exp_avg_sq(copy_checked(fields.at("exp_avg_sq"), p, prefix + "exp_avg_sq"));
      if (fields.count("max_exp_avg_sq"))
        s->max_exp_avg_sq(copy_checked(fields.at("max_exp_avg_sq"), p, prefix + "max_exp_avg_sq"));
      opt.state()[state_key(p)] = std::move(s);
    } else {
      if (!fields.count("momentum_buffer"))
        throw std::runtime_error("optimizer state " + prefix + "momentum_buffer is missing");
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(copy_checked(fields.at("momentum_buffer"), p, prefix + "momentum_buffer"));
      opt.state()[state_key(p)] = std::move(s);
    }
  }
}

}  // namespace ddp
