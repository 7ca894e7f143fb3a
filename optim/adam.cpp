// Adam and AdamW: LibTorch's ports of torch.optim.Adam (L2 weight decay added to the gradient) and AdamW (decoupled
// weight decay), from the same optimizer.* keys.
#include "optim/optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

namespace ddp {
namespace {

template <class Optim, class Options>
std::unique_ptr<torch::optim::Optimizer> make_adam_like(const OptimizerConfig& cfg, double lr,
                                                        std::vector<torch::Tensor> params) {
  auto options =
      Options(lr).betas({cfg.beta1, cfg.beta2}).eps(cfg.eps).weight_decay(cfg.weight_decay).amsgrad(cfg.amsgrad);
  return std::make_unique<Optim>(std::move(params), options);
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_adam(const OptimizerConfig& cfg, double lr,
                                                   std::vector<torch::Tensor> params) {
  return make_adam_like<torch::optim::Adam, torch::optim::AdamOptions>(cfg, lr, std::move(params));
}

std::unique_ptr<torch::optim::Optimizer> make_adamw(const OptimizerConfig& cfg, double lr,
                                                    std::vector<torch::Tensor> params) {
  return make_adam_like<torch::optim::AdamW, torch::optim::AdamWOptions>(cfg, lr, std::move(params));
}

}  // namespace ddp
