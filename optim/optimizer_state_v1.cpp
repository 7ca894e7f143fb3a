// Checkpoint format 1's flat optimizer state ("<parameter index>.<field>"), still read for old checkpoints.
#include "optim/optimizer_state.h"
#include "optim/adam_family.h"
#include "optim/param_state_access.h"

#include <torch/optim/sgd.h>

#include <map>
#include <stdexcept>

namespace ddp {
namespace {

using FlatFields = std::map<std::string, c10::IValue>;

std::map<size_t, FlatFields> flat_by_param(const c10::impl::GenericDict& state, size_t num_params) {
  std::map<size_t, FlatFields> by_param;
  for (const auto& item : state) {
    const std::string key = item.key().isString() ? item.key().toStringRef() : std::string("(not a str)");
    const size_t dot = key.find('.');
    size_t index = 0;
    try {
      index = std::stoul(key.substr(0, dot));
    } catch (const std::exception&) {
      throw std::runtime_error("optimizer state key " + key + " is not <index>.<field>");
    }
    if (dot == std::string::npos || index >= num_params)
      throw std::runtime_error("optimizer state key " + key + " does not match the model's " +
                               std::to_string(num_params) + " parameters");
    by_param[index][key.substr(dot + 1)] = item.value();
  }
  return by_param;
}

}  // namespace

void load_flat_optimizer_state_dict(torch::optim::Optimizer& opt, const c10::impl::GenericDict& state) {
  auto params = optimizer_params(opt);
  auto by_param = flat_by_param(state, params.size());
  opt.state().clear();
  for (auto& [index, fields] : by_param) {
    const torch::Tensor& p = params[index];
    const std::string prefix = std::to_string(index) + ".";
    auto adam = new_adam_state(opt, [&](auto& s) {
      for (const char* need : {"step", "exp_avg", "exp_avg_sq"})
        if (!fields.count(need)) throw std::runtime_error("optimizer state " + prefix + need + " is missing");
      s.step(fields.at("step").toInt());
      s.exp_avg(state_tensor_like(fields.at("exp_avg"), p, prefix + "exp_avg"));
      s.exp_avg_sq(state_tensor_like(fields.at("exp_avg_sq"), p, prefix + "exp_avg_sq"));
      if (fields.count("max_exp_avg_sq"))
        s.max_exp_avg_sq(state_tensor_like(fields.at("max_exp_avg_sq"), p, prefix + "max_exp_avg_sq"));
    });
    if (adam) {
      opt.state()[param_state_key(p)] = std::move(adam);
    } else {
      if (!fields.count("momentum_buffer"))
        throw std::runtime_error("optimizer state " + prefix + "momentum_buffer is missing");
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(state_tensor_like(fields.at("momentum_buffer"), p, prefix + "momentum_buffer"));
      opt.state()[param_state_key(p)] = std::move(s);
    }
  }
}

}  // namespace ddp
