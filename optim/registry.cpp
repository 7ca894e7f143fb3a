// The optimizer registry: every optimizer.name's row, listed once (an optimizer is its own file declaring
// NAME_optimizer() plus its entry here), which config loading reads once they are handed down (train/linked_kinds.h);
// building one and its kernels.
#include "optim/optimizer.h"

#include "base/foreach.h"
#include "optim/optimizer_kind.h"

#include <stdexcept>

namespace ddp {

// The optimizers, in the order --help lists their names.
#define DDP_OPTIMIZERS(X) X(sgd) X(adamw) X(adam) X(rmsprop) X(lars) X(lamb)

#define DDP_DECLARE_OPTIMIZER(name) const OptimizerKind& name##_optimizer();
DDP_OPTIMIZERS(DDP_DECLARE_OPTIMIZER)
#undef DDP_DECLARE_OPTIMIZER

const std::vector<const OptimizerKind*>& optimizer_kinds() {
#define DDP_LIST_OPTIMIZER(name) &name##_optimizer(),
  static const std::vector<const OptimizerKind*> kinds{DDP_OPTIMIZERS(DDP_LIST_OPTIMIZER)};
#undef DDP_LIST_OPTIMIZER
  return kinds;
}

const OptimizerKind& optimizer_kind(std::string_view name) {
  return kind_named(optimizer_kinds(), &OptimizerKind::keys, name, "optimizer.name");
}

UpdateKernels update_kernels(const OptimizerConfig& cfg, const std::vector<torch::Tensor>& params) {
  if (cfg.fused) return UpdateKernels::kFused;
  if (cfg.foreach == Foreach::On) return UpdateKernels::kForeach;
  if (cfg.foreach == Foreach::Off) return UpdateKernels::kForLoop;
  for (const auto& p : params)
    if (!uses_foreach_kernels(p.device())) return UpdateKernels::kForLoop;
  return UpdateKernels::kForeach;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& cfg, double lr,
                                                        const std::vector<ParamGroup>& groups) {
  return optimizer_kind(cfg.name.name).make(cfg, lr, groups);
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& cfg, double lr,
                                                        std::vector<torch::Tensor> params) {
  return make_optimizer(cfg, lr, single_param_group(cfg, std::move(params)));
}

}  // namespace ddp
