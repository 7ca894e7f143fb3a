// The training loss and correct count, on class indices or a mixed batch's probability targets.
#include "train/training_loss.h"

#include <ATen/ATen.h>

namespace ddp {

torch::Tensor training_loss(const torch::Tensor& out, const torch::Tensor& labels, const torch::Tensor& targets,
                            double label_smoothing, bool log_probs) {
  if (targets.defined()) return at::cross_entropy_loss(out, targets, {}, at::Reduction::Mean, -100, label_smoothing);
  return log_probs && label_smoothing == 0
             ? at::nll_loss(out, labels)
             : at::cross_entropy_loss(out, labels, {}, at::Reduction::Mean, -100, label_smoothing);
}

torch::Tensor training_correct(const torch::Tensor& out, const torch::Tensor& labels, const torch::Tensor& targets) {
  return out.argmax(1).eq(targets.defined() ? targets.argmax(1) : labels).sum();
}

}  // namespace ddp
