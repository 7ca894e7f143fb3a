// Building the optimizer optimizer.name names (its row in optim/registry.cpp), the kernels its update runs on
// (torch.optim's for-loop, foreach and fused implementations), and the learning-rate schedule.
#pragma once

#include "config/config.h"
#include "optim/param_groups.h"

#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <vector>

namespace ddp {

// How an update runs, as torch.optim's foreach and fused arguments choose it: the per-parameter loop, multi-tensor
// (_foreach_*) kernels per device and dtype, or one fused kernel (_fused_sgd_, _fused_adam_, _fused_adamw_) per
// device and dtype. The same update either way, up to the order of floating-point operations.
enum class UpdateKernels { kForLoop, kForeach, kFused };

// optimizer.fused and optimizer.foreach for these parameters: fused when asked; foreach when asked, or by default
// where every parameter is on a device with multi-tensor kernels (torch.optim's _default_to_fused_or_foreach);
// the loop otherwise.
UpdateKernels update_kernels(const OptimizerConfig& cfg, const std::vector<torch::Tensor>& params);

// Builds optimizer.name over `groups` (weight_decay_groups) with base learning rate `lr` (already scaled for world
// size if asked); the kernels are chosen for all their parameters together.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& cfg, double lr,
                                                        const std::vector<ParamGroup>& groups);
// The same over one group of `params` with optimizer.weight_decay.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& cfg, double lr,
                                                        std::vector<torch::Tensor> params);

// Learning rate for optimizer step `step` (0-based): warmup over warmup_steps (LinearLR from warmup_start_factor,
// ConstantLR at it, or (step + 1) / warmup when the factor is 0), then none | cosine (to min_lr at total_steps) |
// step (x gamma every step_size steps) | multistep.
double scheduled_lr(const LrSchedulerConfig& cfg, double base_lr, int64_t step, int64_t total_steps);
// Every param group's learning rate (torch's schedulers scale each group's own base lr; ddptrain's groups share one).
void set_lr(torch::optim::Optimizer& opt, double lr);

}  // namespace ddp
