// AdamW (decoupled weight decay): LibTorch's port of torch.optim.AdamW.
#include "optim/optimizer.h"

#include <torch/optim/adamw.h>

namespace ddp {

std::unique_ptr<torch::optim::Optimizer> make_adamw(const OptimizerConfig& cfg, double lr,
                                                    std::vector<torch::Tensor> params) {
  auto options = torch::optim::AdamWOptions(lr)
                     .betas({cfg.beta1, cfg.beta2})
                     .eps(cfg.eps)
                     .weight_decay(cfg.weight_decay)
                     .amsgrad(cfg.amsgrad);
  return std::make_unique<torch::optim::AdamW>(std::move(params), options);
}

}  // namespace ddp
