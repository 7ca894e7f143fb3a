// Optimizer registry: maps optimizer.name to its factory.
#include "optim/optimizer.h"

#include <functional>
#include <map>
#include <stdexcept>

namespace ddp {
namespace {

using OptimizerFactory = std::function<std::unique_ptr<torch::optim::Optimizer>(const OptimizerConfig&, double,
                                                                       std::vector<torch::Tensor>)>;

const std::map<std::string, OptimizerFactory>& optimizer_registry() {
  static const std::map<std::string, OptimizerFactory> r = {{"sgd", make_sgd}, {"adamw", make_adamw}};
  return r;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& cfg, double lr,
                                                        std::vector<torch::Tensor> params) {
  auto it = optimizer_registry().find(cfg.name);
  if (it == optimizer_registry().end()) throw std::invalid_argument("unknown optimizer \"" + cfg.name + "\"");
  return it->second(cfg, lr, std::move(params));
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const auto& [n, _] : optimizer_registry()) names.push_back(n);
  return names;
}

}  // namespace ddp
