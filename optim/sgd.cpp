// SGD with momentum, dampening 0, nesterov and weight decay: LibTorch's port of torch.optim.SGD.
#include "optim/optimizer.h"

#include <torch/optim/sgd.h>

namespace ddp {

std::unique_ptr<torch::optim::Optimizer> make_sgd(const OptimizerConfig& cfg, double lr,
                                                  std::vector<torch::Tensor> params) {
  auto options = torch::optim::SGDOptions(lr)
                     .momentum(cfg.momentum)
                     .weight_decay(cfg.weight_decay)
                     .nesterov(cfg.nesterov)
                     .dampening(0);
  return std::make_unique<torch::optim::SGD>(std::move(params), options);
}

}  // namespace ddp
