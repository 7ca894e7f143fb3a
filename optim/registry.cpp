// Optimizer registry: builds the update rule optimizer.name names (the names are config/choices.h's).
#include "optim/optimizer.h"

#include <stdexcept>

namespace ddp {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& cfg, double lr,
                                                        std::vector<torch::Tensor> params) {
  switch (cfg.name) {
    case OptimizerName::Sgd:
      return make_sgd(cfg, lr, std::move(params));
    case OptimizerName::AdamW:
      return make_adamw(cfg, lr, std::move(params));
    case OptimizerName::Adam:
      return make_adam(cfg, lr, std::move(params));
  }
  throw std::invalid_argument("optimizer.name holds no known optimizer");
}

}  // namespace ddp
