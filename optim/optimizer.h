// Optimizer registry (PyTorch's own SGD / AdamW / Adam from LibTorch) and the per-step learning-rate schedule.
#pragma once

#include "config/config.h"

#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <vector>

namespace ddp {

// Builds optimizer.name over params with base learning rate `lr` (already scaled for world size if asked).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& cfg, double lr,
                                                        std::vector<torch::Tensor> params);

// Factories: sgd.cpp; adam.cpp, both of the Adam family.
std::unique_ptr<torch::optim::Optimizer> make_sgd(const OptimizerConfig& cfg, double lr,
                                                  std::vector<torch::Tensor> params);
std::unique_ptr<torch::optim::Optimizer> make_adamw(const OptimizerConfig& cfg, double lr,
                                                    std::vector<torch::Tensor> params);
std::unique_ptr<torch::optim::Optimizer> make_adam(const OptimizerConfig& cfg, double lr,
                                                   std::vector<torch::Tensor> params);

// Learning rate for optimizer step `step` (0-based): linear warmup over warmup_steps ((step + 1) / warmup),
// then none | cosine (to min_lr at total_steps) | step (x gamma every step_size steps).
double scheduled_lr(const LrSchedulerConfig& cfg, double base_lr, int64_t step, int64_t total_steps);
void set_lr(torch::optim::Optimizer& opt, double lr);

}  // namespace ddp
