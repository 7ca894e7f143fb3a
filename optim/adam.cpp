// Adam (L2 weight decay added to the gradient): LibTorch's port of torch.optim.Adam.
#include "optim/optimizer.h"

#include <torch/optim/adam.h>

namespace ddp {

std::unique_ptr<torch::optim::Optimizer> make_adam(const OptimizerConfig& cfg, double lr,
                                                   std::vector<torch::Tensor> params) {
  auto options = torch::optim::AdamOptions(lr)
                     .betas({cfg.beta1, cfg.beta2})
                     .eps(cfg.eps)
                     .weight_decay(cfg.weight_decay)
                     .amsgrad(cfg.amsgrad);
  return std::make_unique<torch::optim::Adam>(std::move(params), options);
}

}  // namespace ddp
