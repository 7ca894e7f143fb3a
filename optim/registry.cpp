// Optimizer registry: builds the update rule optimizer.name names (the names are config/choices.h's) and resolves the
// kernels it runs on.
#include "optim/optimizer.h"

#include "base/foreach.h"

#include <stdexcept>

namespace ddp {

UpdateKernels update_kernels(const OptimizerConfig& cfg, const std::vector<torch::Tensor>& params) {
  if (cfg.fused) return UpdateKernels::kFused;
  if (cfg.foreach == Foreach::On) return UpdateKernels::kForeach;
  if (cfg.foreach == Foreach::Off) return UpdateKernels::kForLoop;
  for (const auto& p : params)
    if (!uses_foreach_kernels(p.device())) return UpdateKernels::kForLoop;
  return UpdateKernels::kForeach;
}

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
