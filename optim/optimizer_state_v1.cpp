// Checkpoint format 1's flat optimizer state ("<parameter index>.<field>"), still read for old checkpoints: each
// parameter's fields are read as its torch.optim state entry.
#include "optim/optimizer_state.h"

#include "optim/param_state_access.h"
#include "optim/torch_state_form.h"

#include <map>
#include <stdexcept>

namespace ddp {
namespace {

std::map<size_t, c10::impl::GenericDict> flat_by_param(const c10::impl::GenericDict& state, size_t num_params) {
  std::map<size_t, c10::impl::GenericDict> by_param;
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
    auto slot = by_param.try_emplace(index, new_str_dict()).first;
    slot->second.insert_or_assign(key.substr(dot + 1), item.value());
  }
  return by_param;
}

}  // namespace

void load_flat_optimizer_state_dict(torch::optim::Optimizer& opt, const c10::impl::GenericDict& state) {
  auto params = optimizer_params(opt);
  auto by_param = flat_by_param(state, params.size());
  const TorchStateForm& form = torch_state_form(opt);
  std::vector<std::pair<void*, std::unique_ptr<torch::optim::OptimizerParamState>>> loaded;
  for (auto& [index, fields] : by_param) {
    const torch::Tensor& p = params[index];
    auto s = form.param_state_from(fields, p, "optimizer state " + std::to_string(index));
    if (!s) throw std::runtime_error("optimizer state " + std::to_string(index) + " holds no state");
    loaded.emplace_back(param_state_key(p), std::move(s));
  }
  opt.state().clear();
  for (auto& [key, s] : loaded) opt.state()[key] = std::move(s);
}

}  // namespace ddp
