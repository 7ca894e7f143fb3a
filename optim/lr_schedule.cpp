// Learning-rate schedule: linear or constant warmup then none / cosine / step / multistep decay, evaluated per
// optimizer step.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>

namespace ddp {

namespace {

// The warmup's factor at its step k < warmup_steps: the closed forms of torch.optim.lr_scheduler's LinearLR(f, 1.0,
// total_iters=warmup) and ConstantLR(f, total_iters=warmup); factor 0 is LinearLR(1 / warmup, 1.0, warmup - 1).
double warmup_factor(const LrSchedulerConfig& cfg, int64_t k) {
  const double f = cfg.warmup_start_factor, w = static_cast<double>(cfg.warmup_steps);
  if (f == 0) return static_cast<double>(k + 1) / w;
  if (cfg.warmup_method == WarmupMethod::Constant) return f;
  return f + (1.0 - f) * static_cast<double>(k) / w;
}

}  // namespace

double scheduled_lr(const LrSchedulerConfig& cfg, double base_lr, int64_t step, int64_t total_steps) {
  if (step < cfg.warmup_steps) return base_lr * warmup_factor(cfg, step);
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
