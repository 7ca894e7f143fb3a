// StepFigures: the training figures of a log interval, kept on the device and read once.
#include "train/step_figures.h"

namespace ddp {

void StepFigures::add(const torch::Tensor& loss, const torch::Tensor& correct, int64_t samples) {
  losses_.push_back(loss);
  correct_.push_back(correct);
  samples_.push_back(samples);
  if (losses_.size() >= kFold) fold();
}

void StepFigures::fold() {
  torch::NoGradGuard no_grad;
  const auto f64 = losses_.front().options().dtype(torch::kFloat64);
  const torch::Tensor sizes = torch::tensor(samples_, torch::kFloat64).to(f64.device());
  torch::Tensor sums = torch::stack(
      {(torch::stack(losses_).to(torch::kFloat64) * sizes).sum(), torch::stack(correct_).sum().to(torch::kFloat64)});
  folded_ = folded_.defined() ? folded_ + sums : sums;
  losses_.clear();
  correct_.clear();
  samples_.clear();
}

void StepFigures::track(torch::Tensor loss_sum, torch::Tensor correct) {
  tracked_loss_sum_ = std::move(loss_sum);
  tracked_correct_ = std::move(correct);
}

StepFigures::Sums StepFigures::read() {
  Sums sums;
  const size_t n = losses_.size();
  if (n == 0 && !folded_.defined() && !tracked_loss_sum_.defined()) return sums;
  torch::NoGradGuard no_grad;
  // One copy to the host: the kept losses and correct counts, then the folded pair, then the tracked sums.
  std::vector<torch::Tensor> parts;
  if (n > 0) {
    parts.push_back(torch::stack(losses_).to(torch::kFloat64));
    parts.push_back(torch::stack(correct_).to(torch::kFloat64));
  }
  if (folded_.defined()) parts.push_back(folded_);
  if (tracked_loss_sum_.defined())
    parts.push_back(torch::stack({tracked_loss_sum_, tracked_correct_.to(torch::kFloat64)}));
  const torch::Tensor host = torch::cat(parts).cpu();
  const double* v = host.const_data_ptr<double>();
  for (size_t i = 0; i < n; ++i) {
    sums.loss_sum += v[i] * static_cast<double>(samples_[i]);
    sums.correct += static_cast<int64_t>(v[n + i]);
  }
  size_t next = 2 * n;
  if (folded_.defined()) {
    sums.loss_sum += v[next];
    sums.correct += static_cast<int64_t>(v[next + 1]);
    next += 2;
  }
  if (tracked_loss_sum_.defined()) {
    sums.loss_sum += v[next];
    sums.correct += static_cast<int64_t>(v[next + 1]);
    tracked_loss_sum_.zero_();
    tracked_correct_.zero_();
  }
  losses_.clear();
  correct_.clear();
  samples_.clear();
  folded_ = torch::Tensor();
  return sums;
}

}  // namespace ddp
