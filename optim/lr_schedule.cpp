// Learning-rate schedule: linear warmup then none / cosine / step / multistep decay, evaluated per optimizer step.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>

namespace ddp {

double scheduled_lr(const LrSchedulerConfig& cfg, double base_lr, int64_t step, int64_t total_steps) {
  if (step < cfg.warmup_steps) return base_lr * static_cast<double>(step + 1) / static_cast<double>(cfg.warmup_steps);
  const int64_t after = step - cfg.warmup_steps;
  if (cfg.decay == LrDecay::Cosine) {
    const int64_t span = std::max<int64_t>(1, total_steps - cfg.warmup_steps);
    const double progress = std::min(1.0, static_cast<double>(after) / static_cast<double>(span));
    return cfg.min_lr + (base_lr - cfg.min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  if (cfg.decay == LrDecay::Step) return base_lr * std::pow(cfg.gamma, static_cast<double>(after / cfg.step_size));
  if (cfg.decay == LrDecay::MultiStep) {  // MultiStepLR's closed form: gamma ** bisect_right(sorted milestones, step)
    const auto passed =
        std::count_if(cfg.milestones.begin(), cfg.milestones.end(), [&](int64_t m) { return m <= after; });
    return base_lr * std::pow(cfg.gamma, static_cast<double>(passed));
  }
  return base_lr;
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

}  // namespace ddp
